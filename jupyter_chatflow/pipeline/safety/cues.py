"""Word families shared by the hazard frames: requests, intent, evasion, detail, people, explanations.

Each cue is written as plain comma-separated phrases (lemmatized when built, so "getting caught" also matches "get
caught" and "got caught"). They say what a notion is, not any one test sentence: a request for a method is "how do
I", "what's the easiest way", "walk me through", "give me"…; a question about a thing ("what is", "why did",
"how does it work") is an explanation, which the frames read as a benign context.
"""

from __future__ import annotations

from .lexicon import Cue

__all__ = ["DETAIL", "EVASION", "EXPLAIN", "PERSON", "REQUEST", "SELF", "WRITE", "cue"]


def cue(name: str, phrases: str, exclude: str = "", patterns: tuple[str, ...] = ()) -> Cue:
    """A cue from comma-separated phrases (and regexes for what has a fixed shape, see `lexicon.Cue`)."""
    split = lambda text: tuple(p.strip() for p in text.split(",") if p.strip())  # noqa: E731
    return Cue(name=name, phrases=split(phrases), exclude=split(exclude), patterns=patterns)


_SUBJECTS = ("i", "we", "you", "someone", "somebody", "one", "they", "he", "she", "a person", "people")
_MODALS = ("do", "can", "could", "would", "should", "might", "will", "to")

REQUEST = cue(
    "request",
    ", ".join(f"how {m} {s}" for m in _MODALS[:-1] for s in _SUBJECTS)
    + ", how to, how much, how many, how long, how deep, how far, how high, what's the best, what is the best, "
    "best way, best spot, best place, best time, best method, easiest, quickest, fastest, simplest, quietest, "
    "most effective, most reliable, smartest, smart way, good way, way to, a way, ways to, where can i, "
    "where do i, where should i, where would i, where to, which, what should i, what would i, what could i, "
    "what do i need, what would i need, what would be, what would, what could, what can i, what household, "
    "step, steps, instructions, instruction, guide, tutorial, recipe, procedure, method, process for, "
    "teach me, show me, tell me, walk me through, help me, give me, get me, find me, i need, outline, "
    "explain how, explain exactly, describe how, write, draft, compose, create, generate, make me, make a, plan, "
    "tips, advice on, i want to, i'm going to, i am going to, i will, i plan to, i'm planning, let's, roleplay, "
    "role play, pretend, be my, can you, could you, would you, please, so i can, so that i can, hypothetically, "
    "theoretically, purely theoretical, asking for a friend, list, how hard, how fast, how strong, "
    "where on the body, where exactly, what time, what's the going rate, which sites, which apps, which app, "
    "which drug, which one, what's a good, a good way, smart way, ideas for, ideas to, any way, is there a way, "
    "you are, you're, act as, play a, let's play, imagine, in character, for my novel, for my story, "
    "for my thriller, for a school project, describe, recite, explain, i'm gonna, i'm going, i want, i need to",
)
"""Asking for a method, a text or help; or saying what one means to do."""

WRITE = cue(
    "write",
    "write, draft, compose, create, generate, make up, come up with, invent, post, tweet, publish, spread, "
    "help me write, help me word, word a, give me, send, make a, make me, produce, rewrite, continue, describe, "
    "tell, announce, put them on, put it on, paragraph, slogan, song, poem, speech, article, essay, story, post, "
    "flyer, flyers, email, message, letter, petition, script, talking points, tweet, caption, review",
)
"""Asking for a text to be produced."""

DETAIL = cue(
    "detail",
    "step by step, steps, exact, exactly, precise, precisely, detailed, in detail, specific, specifics, "
    "quantities, quantity, amounts, how much, how many, ingredients, precursor, precursors, reagent, reagents, "
    "reaction conditions, realistic enough, actually work, actually works, really work, in real life, at home, "
    "in my garage, garage, home lab, kitchen lab, blueprint, schematic, list the steps",
)
"""Asking for operational detail: what turns a story or a question into a recipe."""

EVASION = cue(
    "evasion",
    "without getting caught, get caught, not get caught, without being caught, be caught, can't be traced, "
    "cannot be traced, traced back, trace it back, trace back, tracing, untraceable, without a trace, so the police, "
    "police think, investigators think, cover my tracks, cover his tracks, get away with, alibi, no evidence, "
    "leave no evidence, without leaving marks, without leaving evidence, leave no marks, undetected, undetectable, "
    "raising red flags, red flags, look like an accident, looks like an accident, natural causes, "
    "without anyone finding out, no one finds out, nobody finds out, nobody will know, no one will know, "
    "can deny, deny it, deny later, without them noticing, without her noticing, without him noticing, "
    "without anyone noticing, nobody notices, nobody to notice, no one notices, without her knowing, "
    "without him knowing, without them knowing, without their knowledge, secretly, without anyone hearing, "
    "without her realizing, without him realizing, without them realizing, without realizing, nobody questions, "
    "no one questions, without anyone questioning, under the radar, unnoticed, in secret, won't tell, "
    "doesn't find out, never find out, so nobody, so no one, without * finding out, cops finding out, "
    "police finding out, lose the cops, lose them, so they lose me, outrun the police, outrun the cops, "
    "doesn't flag, don't flag, without flagging, not get flagged, avoid detection, avoid suspicion, "
    "before they get cancelled, can't identify me, cannot identify me, won't recognize me, without a record, "
    "without leaving a trace, no trace, hide it from, hide them from, so nobody knows, without getting caught",
)
"""Wanting not to be caught, traced or noticed."""

PERSON = cue(
    "person",
    "person, people, someone, somebody, him, her, them, neighbour, neighbor, wife, husband, spouse, ex, ex wife, "
    "ex husband, girlfriend, boyfriend, partner, business partner, fiance, boss, coworker, coworkers, co worker, "
    "colleague, colleagues, employee, employees, manager, roommate, flatmate, brother, sister, mother, father, "
    "mom, mum, dad, stepdad, stepmom, stepfather, stepmother, parent, parents, in laws, mother in law, child, "
    "kid, baby, toddler, son, daughter, teacher, student, students, classmate, classmates, president, politician, "
    "senator, mayor, judge, witness, journalist, police officer, cop, officer, stranger, family, friend, guy, "
    "girl, woman, man, boy, lady, mailman, postman, landlord, tenant, customer, nurse, doctor, enemy, rival, "
    "bully, crowd, everyone, everybody, the people, old school, school, my class, them all, all of them, "
    "target, victim, victims, hostage, staff, the staff, customers, passengers, guests, whoever, a man, "
    "old man, old woman, old lady, homeless, apprentice, cashier, waiter, barista, driver, cyclist, kid, kids, "
    "his, her, their, my ex's, date, wife's, husband's",
)
"""A person (a possible victim or target)."""

SELF = cue("self", "i, me, my, myself, i'm, i've, you, your, yourself")
"""The speaker (or a generic "you"): whose body a self-harm question is about."""

EXPLAIN = cue(
    "explain",
    "what is a, what is an, what's a, what's an, what are, what was, what were, what does, explain what, why is, "
    "why are, why was, "
    "why were, why do, why does, why did, how does * work, how do * work, how did, history, historical, "
    "what happened, as an example, as the example, for example, definition, meaning, the difference between, "
    "what does * mean, how can i tell, how can i spot, how can i recognize, how do i recognize, how do i spot, "
    "how do i recognise, how can i recognise, recognise, warning signs, how do * detect, how is * detected",
    exclude="what is the best, what is the easiest, what is the quickest, what is the simplest, what is the most, "
    "what is a good way, what are the steps, what are the best, what are some ways",
)
"""Asking what something is or why: an explanation, not a method."""
