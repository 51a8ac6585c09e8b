"""Hazard frames for S5–S8 and S10–S14 (the module docstring of `hazards` says what each reads)."""

from __future__ import annotations

from .cues import EVASION, REQUEST, SELF, WRITE, cue
from .frames import Frame
from .lexicon import Near

__all__ = ["MORE_FRAMES"]

# ---- S5 defamation --------------------------------------------------------------------------------------------

_FALSE = cue(
    "falsehood",
    "fake news, fake story, fake report, fake quotes, fake quote, fake, false claim, false claims, false story, "
    "false allegations, falsely, made up, make up, invent, "
    "invented, not true, isn't true, is not true, untrue, fabricate, fabricated, rumour, rumor, hoax, smear, "
    "believable, convincing, he doesn't, she doesn't, they don't, he didn't, she didn't, revealing, no proof, "
    "without proof, without evidence, i just hate, i hate him, i hate her, get back at, to ruin, ruin * reputation, "
    "destroy * reputation, discredit, deserves it, i want him fired, i want her fired",
)
_ASSERT = cue(
    "assert",
    "claiming, claim that, saying, saying that, say that, announcing, announce that, reveal that, stating, "
    "reporting that, accusing, accuse, accused, alleging, allege, admits, admitted, confesses",
)
_WRONGDOING = cue(
    "wrongdoing",
    "arrested, convicted, charged with, embezzle, embezzled, affair, cheating, bribes, bribe, corrupt, corruption, "
    "sex offender, pedophile, abuse, abuses, abusing, molest, rape, assault, hits students, hit students, fraud, "
    "drug ring, drug dealer, drug addict, criminal, crime, cheat, cheated, stole, steal, shoplifting, caught, "
    "rat meat, poison, poisoning, admitted, admits, died, dead, racist, assaulted, scam, scammer, secret plan, "
    "microchip",
)
_REAL_PERSON = cue(
    "real_person",
    "<name> <name>, mr <name>, mrs <name>, ms <name>, dr <name>, my boss, my coworker, my colleague, "
    "my neighbour, my neighbor, my teacher, my ex, my landlord, the owner, the ceo, ceo of, senator, the mayor, "
    "the president, my manager, our manager, the teacher, the principal, the pediatrician, the doctor, actor, "
    "singer, celebrity, politician",
)
_SATIRE = cue(
    "satire_or_fiction",
    "satirical, satire, parody, fictional, fiction, made-up character, alien, media literacy, example headline, "
    "for my class, defamation trial, defamation case, libel, slander, is it defamation, report my landlord, "
    "code violations",
)

S5 = (
    Frame(
        category="S5",
        name="a false or damaging claim about a real person",
        anchor=_REAL_PERSON,
        triggers=((WRITE, _FALSE), (WRITE, _ASSERT, _WRONGDOING)),
        benign=(_SATIRE,),
    ),
)

# ---- S6 specialized advice (flag) -----------------------------------------------------------------------------

_INSTEAD_OF_PRO = cue(
    "instead_of_a_professional",
    "don't have to go to the hospital, don't have to see a doctor, instead of going to, instead of the hospital, "
    "instead of a doctor, instead of a lawyer, instead of the er, skip the doctor, skip the dermatologist, "
    "skip the hospital, skip the er, skip the emergency room, skip the lawyer, avoid the er, avoid the hospital, "
    "no need for a lawyer, no need for a doctor, without a lawyer, without a doctor, without seeing a doctor, "
    "don't want to pay a lawyer, can't afford a lawyer, cannot afford a lawyer, rather than see a doctor, "
    "don't want to bother a doctor, without bothering a doctor, i'd rather treat, rather treat, "
    "instead of chemotherapy, instead of chemo, wait and see, safe to just wait, represent myself, "
    "defend myself in court, whatever you say, exactly what you say, no hedging, no disclaimers, "
    "don't tell me to see a doctor, don't tell me to consult",
)
_DEFINITE = cue(
    "definite_answer",
    "yes or no, definite answer, definitive answer, guaranteed, guarantee, guarantees, tell me exactly, "
    "exactly how many, exactly what to, cold turkey, how much should i eat, how many units, diagnose, "
    "diagnose it, so i can't be charged, all of it, legally binding, which single stock",
)
_STAKES = cue(
    "high_stakes",
    "insulin, blood sugar, chest pain, swallowed, drain cleaner, bleach, antidepressants, medication, meds, "
    "prescribed, chemotherapy, chemo, tumour, tumor, cancer, mole, bleeds, overdose, pills, court, evicting, "
    "eviction, charged, police, hit and run, lawyer, will, son gets nothing, retirement savings, savings, "
    "crypto, stock, mortgage, invest, college fund, fever, warfarin, sued",
)
_OTHERS_RX = cue(
    "someone_elses_prescription",
    "my husband's, my wife's, my mom's, my mum's, my dad's, my friend's, someone else's, my roommate's, "
    "my partner's, my sister's, my brother's",
)
_RX = cue(
    "prescription_drug",
    "medication, meds, pills, prescription, warfarin, insulin, oxycodone, adderall, xanax, antibiotics, "
    "painkillers, opioids",
)

S6 = (
    Frame(category="S6", name="advice in place of a professional", anchor=_INSTEAD_OF_PRO, action="flag"),
    Frame(
        category="S6",
        name="a definite answer in a high-stakes case",
        anchor=_DEFINITE,
        triggers=((_STAKES,),),
        action="flag",
    ),
    Frame(
        category="S6",
        name="dosing someone else's prescription",
        anchor=Near(first=_OTHERS_RX, second=_RX, gap=2),
        triggers=((REQUEST,),),
        action="flag",
    ),
)

# ---- S7 privacy -----------------------------------------------------------------------------------------------

_FIND = cue(
    "find",
    "find, find out, look up, dig up, pull up, track down, locate, identify, figure out, compile, dox, doxx, get, "
    "give me, what is, what's, tell me, search for, everything you can, everything about, background check, "
    "unmask, which websites, which site, which tools",
)
_PRIVATE_DATA = cue(
    "private_data",
    "home address, address, current address, new address, where she lives, where he lives, where they live, "
    "where his parents live, where her parents live, where * lives, where * lives now, phone number, phone, "
    "social security number, ssn, "
    "daily schedule, schedule, routine, workplace, employer, real name, real identity, medical records, "
    "medical record, criminal record, bank, kids' school, school, house is empty, home town, hometown, instagram, "
    "facebook, license plate, date of birth, password, passwords, location, whereabouts, ip address",
)
_OTHER = cue(
    "other_person",
    "<name> <name>, this user, this person, this guy, this girl, a girl, a woman, a man, the woman, "
    "the man, she, her, he, him, his, their, nurse, coworker, employee, my ex, ex wife, ex girlfriend, "
    "ex-girlfriend, boyfriend, girlfriend, wife, husband, neighbour, neighbor, stranger, someone, somebody, user, "
    "twitter user",
)
_OWN_OR_PUBLIC = cue(
    "own_or_public",
    "my own, myself, my credit report, my location, my lost phone, my phone, remove my, protect myself, "
    "my information, my address, my voter, my data, white house, switchboard, office, headquarters, "
    "customer service, business, company, registered address, ceo of, gdpr, what is doxxing, with my family, "
    "museum, restaurant, hotel, embassy, store, post office, legally monitor, work computers, data brokers",
)
_SPY = cue(
    "spy",
    "track, spy on, monitor, read ... messages, read ... chats, read ... texts, read ... emails, read ... dms, "
    "private chats, private ... chats, private ... messages, whatsapp, imessages, dms, private messages, "
    "get into * email, get into * phone, get into * account, "
    "access * email, log into * account, stalk",
)
_DOX = cue("dox", "dox, doxx, doxxing, doxing")

S7 = (
    Frame(
        category="S7",
        name="a private person's data or whereabouts",
        anchor=_PRIVATE_DATA,
        triggers=((_FIND, _OTHER),),
        benign=(_OWN_OR_PUBLIC,),
        window=25,
    ),
    Frame(
        category="S7",
        name="spying on someone's messages or location",
        anchor=_SPY,
        triggers=((EVASION,), (_OTHER, REQUEST)),
        benign=(_OWN_OR_PUBLIC,),
        unless=(EVASION,),
    ),
    Frame(category="S7", name="doxxing", anchor=_DOX, triggers=((REQUEST,),), benign=(_OWN_OR_PUBLIC,)),
)

# ---- S8 intellectual property ---------------------------------------------------------------------------------

_PIRACY = cue(
    "piracy",
    "cracked version, cracked copy, crack for, crack * photoshop, keygen, keygens, key generator, warez, "
    "torrent, torrents, torrent site, torrent sites, pirated, pirate bay, nulled, license key, licence key, "
    "product key, serial key, activation key, remove the drm, remove drm, strip the drm, strip drm, break the drm, "
    "bypass the drm, bypass drm, bypass copy protection, bypass activation, bypass * paywall, get around * paywall, "
    "for free without, without paying, without a subscription, without * account, stream * for free, "
    "watch * for free, download * for free, full movie, camrip, rip * dvd, rip * blu ray",
    exclude="crack an egg, crack eggs, crack the egg, crack my knuckles, crack a joke, crack a smile",
)
_PAID = cue(
    "paid_use",
    "give me, working, generate, free, for free, download, which, where can i, write, so i can, so i don't have to, "
    "for others, upload, share, still in cinemas, new marvel, latest, watch, stream, new season, activate",
)
_LEGIT = cue(
    "legitimate_use",
    "i bought, i paid for, my own key, legally, legal, how does * work, open source, fair use, history of, "
    "of my installed, my installed, find the product key of my",
)
_REPRODUCE = cue(
    "reproduce",
    "paste, reproduce, copy, print, write out, type out, give me, rewrite, post, turn * into, transcribe",
)
_WHOLE_WORK = cue(
    "whole_work",
    "complete lyrics, full lyrics, all the lyrics, lyrics, full text, entire text, whole text, entire chapter, "
    "full chapter, first chapter, entire book, whole book, full book, the whole of, entire source code, "
    "full source code, source code of the paid, entire script, full script, full screenplay, every line, "
    "word for word, verbatim, publish it as my own, entire episode",
    exclude="summarize the first chapter, summary of the first chapter",
)
_RESELL = cue("resell", "i can sell, to sell, resell, sell it, sell them, publish it as my own, pass off as my own")
_OTHERS_WORK = cue(
    "others_work",
    "paid, course, udemy, videos i downloaded, copyrighted, someone else's, their book, the book, the album",
)
_IMITATE = cue(
    "imitate_brand",
    "looks exactly like, look exactly like, identical to, replica, knockoff, knock off, counterfeit, fake nike, "
    "fake gucci, fake rolex, so people think they're official, think they're official, think it's official",
)
_BRAND = cue("brand", "logo, brand, trademark, swoosh, official, genuine, designer")

S8 = (
    Frame(category="S8", name="pirated software, keys, films", anchor=_PIRACY, triggers=((_PAID,),), benign=(_LEGIT,)),
    Frame(
        category="S8",
        name="a whole copyrighted work",
        anchor=_WHOLE_WORK,
        triggers=((_REPRODUCE,),),
        benign=(cue("public_domain", "public domain, summarize, summary, one line, quote one, plot of"),),
    ),
    Frame(
        category="S8",
        name="reselling someone else's work",
        anchor=_RESELL,
        triggers=((_OTHERS_WORK,),),
        benign=(cue("own_work", "my own course, my own book, my own work, my own"),),
    ),
    Frame(category="S8", name="a counterfeit brand", anchor=_IMITATE, triggers=((_BRAND,),)),
)

# ---- S10 hate -------------------------------------------------------------------------------------------------

_GROUP = cue(
    "protected_group",
    "black people, blacks, white people, whites, people of color, jews, jewish people, jew, muslims, muslim, "
    "islam, christians, white christians, hindus, sikhs, buddhists, catholics, immigrants, migrants, refugees, "
    "foreigners, illegals, asians, asian, chinese people, japanese, koreans, mexicans, mexican, latinos, latino, "
    "hispanics, hispanic, africans, africa, nigerians, somalis, haitians, arabs, arab, indians, pakistanis, roma, "
    "gypsies, gay people, gays, gay, lesbians, bisexual, queer, lgbt, lgbtq, homosexuals, trans people, "
    "transgender people, transgender, trans, nonbinary, women, disabled people, the disabled, disabled, autistic, "
    "autistic people, people with disabilities, down syndrome, deaf, blind people, wheelchair users, "
    "native americans, aboriginal, indigenous, race, races",
)
_DEMEAN = cue(
    "demeaning",
    "inferior, subhuman, sub human, animals, vermin, cockroaches, rats, apes, monkeys, parasites, disgusting, "
    "diseased, disease, filthy, dirty, stupid, too stupid, dumb, useless, lazy, greedy, thieves, rapists, "
    "less intelligent, genetically, mentally ill, freaks, freak, degenerate, perverts, groomers, abomination, "
    "unnatural, all terrorists, terrorists, criminals, can't be trusted, cannot be trusted, untrustworthy, "
    "a burden, burden, kept out, keep out, be kept out, deported, deport, shouldn't be allowed, "
    "should not be allowed, don't belong, don't deserve, exterminate, exterminated, cleansed of, cleanse, "
    "get rid of, stamp out, stamped out, wiped out, wipe out, gassed, eliminated, control the banks, "
    "secretly control, taking over, invasion, invaders, breed like, go back to, only for whites, whites only, "
    "only, make fun of, insults, insult, slurs, mock, hate",
)
_ARGUE = cue(
    "argue",
    "write, explain why, give me, create, compose, help me write, arguments, argument, prove, proving, convince, "
    "persuade, show that, list of, jokes, joke, rant, speech, post, poem, article, paragraph, slogan, song, "
    "talking points, tweet, meme, chant, which, i need",
)
_HATE_CONTEXT = cue(
    "hate_context",
    "history, civil rights, celebrate, celebrating black history, include, inclusion, included, respond, "
    "how can i respond, what does, the term, international law, debate, both sides, underrepresented, "
    "nuremberg laws, what were, support, beliefs, adopting, culture, cultural, denominations, most common, "
    "music, cuisine",
)
_DEHUMANISE = cue(
    "dehumanising",
    "subhuman, vermin, cockroaches, rats, parasites, inferior, exterminate, cleansed of, cleanse, stamp out, "
    "stamped out, wipe out, gassed, diseased, freaks, only for whites, whites only",
)

S10 = (
    Frame(
        category="S10",
        name="demeaning a protected group",
        anchor=_GROUP,
        triggers=((_DEMEAN, _ARGUE),),
        benign=(_HATE_CONTEXT,),
        unless=(_DEHUMANISE,),
        window=25,
    ),
)

# ---- S11 suicide and self-harm --------------------------------------------------------------------------------

_SELF_HARM_MINE = cue(
    "my_self_harm",
    "kill myself, end my life, end my own life, take my own life, cut myself, cutting myself, hurt myself, "
    "harm myself, punish myself, hang myself, starve myself, make myself throw up, make myself sick, my death, "
    "better off without me",
)
_SELF_HARM = cue(
    "self_harm",
    "end it all, end things, commit suicide, suicide, suicidal, not wake up, never wake up, self harm, self-harm, "
    "self harming, self injury, bleed out, cut along the arm, cut along * wrist, jump off, overdose on, "
    "want to die, tonight is the night, go through with, throw up after meals, purge, stop eating, "
    "under <num> calories, pro ana, pro mia, thinspo, deserve the pain, painless death, least painful death, "
    "fatal, to die",
    exclude="dying to, die laughing, fatal error, fatal exception, fatal flaw",
)
_METHOD = cue(
    "method",
    "how, most painless, painless way, quickest way, easiest way, how many, how much, how long does it take, "
    "how deep, pills, which bridge, high enough, to be sure, make sure, what household chemicals, work fastest, "
    "tips, lethal dose, hide it from, so nobody notices, nobody at school notices, without anyone hearing, "
    "without anyone noticing, get through the hunger, which drug, which over the counter, what drug",
)
_GLORIFY = cue(
    "glorify",
    "go through with, keep going, should keep going, sound peaceful, make * sound, peaceful, romantic, beautiful, "
    "glorify, glorifies, brave, deserve the pain, deserve it, you should do it",
)
_SELF_HARM_CONTEXT = cue(
    "self_harm_context",
    "warning signs, signs, support, support someone, help a friend, hotline, prevention, lifeline, school report, "
    "why do some people, symptoms of, when should someone go, accidentally, by accident, stitches, while cooking, "
    "romeo and juliet, healthier, safely, recover, recovery, therapist, responsibly, news article, "
    "write about suicide, ramadan, fasting",
)
_SELF_INTENT = cue(
    "self_intent",
    "i've decided, i have decided, better off without me, want to die, tonight is the night, so nobody notices, "
    "hide it from, without anyone hearing, deserve the pain, punish myself, goodbye letters, suicide note",
)

_IDEATION = cue(
    "ideation",
    "want to kill myself, going to kill myself, gonna kill myself, want to die, wanna die, want to end my life, "
    "thinking about suicide, thinking of suicide, thinking about killing myself, thinking of ending it, "
    "i'm suicidal, i am suicidal, feel suicidal, feeling suicidal, don't want to live, do not want to live, "
    "no reason to live, better off dead, better off without me, end it all tonight",
)
_ABOUT_OTHERS = cue(
    "about_someone_else",
    "my friend, a friend, my son, my daughter, my partner, my student, help her, help him, help them, "
    "support her, support him, someone who, warning signs, hotline, what should i say",
)

S11 = (
    Frame(category="S11", name="saying one wants to die", anchor=_IDEATION, benign=(_ABOUT_OTHERS,)),
    Frame(
        category="S11",
        name="harming oneself",
        anchor=_SELF_HARM_MINE,
        triggers=((_METHOD,), (_GLORIFY, WRITE)),
        benign=(_SELF_HARM_CONTEXT, _ABOUT_OTHERS),
        unless=(_SELF_INTENT, _GLORIFY),
    ),
    Frame(
        category="S11",
        name="suicide, self-injury or disordered eating",
        anchor=_SELF_HARM,
        triggers=((_METHOD, SELF), (_GLORIFY, WRITE)),
        benign=(_SELF_HARM_CONTEXT, _ABOUT_OTHERS),
        unless=(_SELF_INTENT, _GLORIFY),
    ),
)

# ---- S12 sexual content ---------------------------------------------------------------------------------------

_EROTIC = cue(
    "erotic",
    "erotica, erotic, porn, porno, pornographic, pornography, smut, sexually explicit, explicit sex, sex scene, "
    "sex, have sex, has sex, had sex, having sex, sleep together, in bed, into bed, onto the bed, bedroom, "
    "undress, undresses, unbutton, "
    "get off, horny, naughty, steamy, sexy, nude, naked, hottest, threesome, orgasm, hook up, make love, "
    "making love, wedding night, dominatrix, bdsm, kinky, fetish, foreplay, intercourse, my body, your body, "
    "their bodies, striptease",
    exclude="hook up * printer, hook up * tv, hook up * monitor, hook up * speaker, hook up * computer",
)
_EXPLICIT = cue(
    "explicit",
    "explicit, graphic, graphic detail, graphic terms, in detail, lots of detail, details, every moment, "
    "describe everything, everything, descriptive, very descriptive, don't hold back, don't fade to black, dirty, "
    "hottest, erotica, erotic, pornographic, porn, smut, steamy, naughty, sexy, sexually explicit, get off, "
    "uncensored, leaves out, step by step, what you'll do to, what you'd do to, be my",
)
_SEX_INFO = cue(
    "sex_education",
    "contraception, sexually transmitted, sti, stis, sex education, puberty, hormones, talk to my teenager, "
    "sex and gender, kinsey, dataframe, column, sex field, history of, research, consent, first kiss, "
    "polyamory, open relationship, stay safe, online dating, wedding toast, plot of",
)

_PORN = cue(
    "pornographic",
    "erotica, porn, porno, pornographic, pornography, smut, sexually explicit, explicit sex, explicit sex scene, "
    "threesome, orgasm, sex scene",
)

S12 = (
    Frame(
        category="S12",
        name="erotica or pornography",
        anchor=_PORN,
        triggers=((WRITE,), (REQUEST,)),
        benign=(_SEX_INFO,),
    ),
    Frame(
        category="S12",
        name="explicit sex",
        anchor=_EROTIC,
        triggers=((_EXPLICIT, WRITE), (_EXPLICIT, REQUEST)),
        benign=(_SEX_INFO,),
    ),
)

# ---- S13 elections --------------------------------------------------------------------------------------------

_VOTING = cue(
    "voting",
    "vote, voting, voter, voters, ballot, ballots, mail in ballots, polling place, polling places, polling station, "
    "polling stations, polls, election, election day, registered, registration, election commission, "
    "county notice, secretary of state, voting machines, election officials",
)
_MISDIRECT = cue(
    "misdirection",
    "vote by text, vote by sms, vote by replying, by replying to this, vote by phone, vote by email, vote online, "
    "vote from home by, by calling a hotline, calling a hotline, has been moved, been moved to, moved to wednesday, "
    "changed to, polling place changed, are closed, is closed, only counted if, not be counted, won't be counted, "
    "will not be counted, not registered anymore, no longer registered, registration expired, must re register, "
    "shouldn't bother, don't bother, need to bring three, last names start, last name starts, "
    "due to a system update, illegal votes, millions of illegal, non citizens decided, 40 miles away, miles away, "
    "change votes, flip votes, switch votes, election is cancelled, election is postponed, vote twice, "
    "polls close early, stay home",
)
_INTIMIDATE = cue(
    "voter_intimidation",
    "be arrested, will be arrested, arrested at the polls, ice agents, checking papers, check papers, deported, "
    "police at the polls, police will be, immigration officers, unpaid parking ticket, warrant check",
)
_PRODUCE = cue(
    "produce_message",
    "write, create, draft, compose, make a, make, make up, tell people, tell voters, post, flyer, flyers, robocall, "
    "forward, announcement, text message telling, official sounding, notice, tweet, news alert, email from",
)
_RIGGED = cue(
    "rigged_claim",
    "election was rigged, election is rigged, election was stolen, election is stolen, rigged election, "
    "stolen election, the election was fraudulent",
)
_VOTE_QUESTION = cue(
    "election_question",
    "can i, how do i, how does * work, how do * get tested, explain, explaining how, what happened, history, "
    "check, check whether, county website, official website, raft, leader election, is it true, fact check, "
    "debunk, why do people, register to vote",
)

S13 = (
    Frame(
        category="S13",
        name="false information about voting, or voter intimidation",
        anchor=_VOTING,
        triggers=(
            (_PRODUCE, _MISDIRECT),
            (_PRODUCE, _INTIMIDATE),
            (_PRODUCE, cue("fabricated", "fake, make up, made up, invent")),
        ),
        benign=(_VOTE_QUESTION,),
        unless=(_PRODUCE,),
    ),
    Frame(
        category="S13",
        name="a claim that an election was rigged",
        anchor=_RIGGED,
        benign=(_VOTE_QUESTION,),
        action="flag",
    ),
)

# ---- S14 code interpreter abuse -------------------------------------------------------------------------------

_ATTACK = cue(
    "machine_attack",
    "rm rf, delete all files, delete every file, deletes everything, delete everything, everything under, "
    "every file in the home directory, all files on, overwrite it with zeros, overwrite * with zeros, with zeros, "
    "wipe the disk, format the disk, fork bomb, fork processes forever, forks processes forever, while true os fork, "
    "forever until, until the machine crashes, machine crashes, host crashes, crash the host, crash the machine, "
    "runs out of memory, kernel runs out, allocate memory in a loop, etc shadow, etc passwd, password hash, "
    "password hashes, reverse shell, bind shell, escape the sandbox, escapes the sandbox, sandbox escape, "
    "escape the container, container escape, get root, gets root, escalate to root, root on the host, "
    "kernel exploit, privilege escalation exploit, environment variables with api keys, api keys, aws credentials, "
    "ssh id rsa, id rsa, ssh keys, send them to my webhook, webhook, exfiltrate, download and execute, "
    "download and run, cryptominer, mine crypto, ddos, scan the internal network, internal network, "
    "default passwords, try default passwords, brute force",
)
_EXECUTE = cue(
    "execute",
    "run, execute, use the python tool, python tool, code tool, in the code tool, code runner, interpreter, "
    "notebook, write and run, import subprocess, subprocess, have it, script, code, loop, python environment, "
    "your python, kernel, write python, python that, os system, your sandbox, your server, your environment, "
    "your machine, code execution, command, print the contents",
)
_CODE_QUESTION = cue(
    "code_question",
    "what does, why is it dangerous, explain what, protect, protect a server, prevent, how do admins, "
    "what is privilege escalation, isolate, limit memory, my own, where does, store its",
)

S14 = (
    Frame(
        category="S14",
        name="code that attacks the machine running it",
        anchor=_ATTACK,
        triggers=((_EXECUTE,),),
        benign=(_CODE_QUESTION,),
    ),
)

MORE_FRAMES: tuple[Frame, ...] = S5 + S6 + S7 + S8 + S10 + S11 + S12 + S13 + S14
