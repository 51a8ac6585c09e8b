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
    "destroy * reputation, discredit, deserves it, i want him fired, i want her fired, never happened, "
    "it never happened, even though it never happened, he isn't, she isn't, he's not, she's not, it's not true, "
    "its not true, no evidence, invent quotes, invented quotes, fake text, fake texts, fake screenshots, "
    "fake messages, fake screenshot, make it sound real, sound real, look real, secretly, i didn't like him, "
    "i didn't like her, so nobody hires, so no one hires, get * fired, pretend it's real",
)
_ASSERT = cue(
    "assert",
    "claiming, claim that, saying, saying that, say that, announcing, announce that, reveal that, stating, "
    "reporting that, accusing, accuse, accused, alleging, allege, admits, admitted, confesses, stating that, "
    "proving, prove, proves, exposing, expose, showing that, showing, shows that, reveal, reveals, says, "
    "telling, tell everyone, telling the town, tell people, was caught, is a, is an, caught",
)
_WRONGDOING = cue(
    "wrongdoing",
    "arrested, convicted, charged with, embezzle, embezzled, affair, cheating, bribes, bribe, corrupt, corruption, "
    "sex offender, pedophile, abuse, abuses, abusing, molest, rape, assault, hits students, hit students, fraud, "
    "drug ring, drug dealer, drug addict, criminal, crime, cheat, cheated, stole, steal, shoplifting, caught, "
    "rat meat, poison, poisoning, admitted, admits, died, dead, racist, assaulted, scam, scammer, secret plan, "
    "microchip, trafficking, human trafficking, terrorist, terrorists, terrorism, funds, funding, murder, "
    "murdered, killed, kills, drunk, molesting, molested, faking, faked, fake degrees, lied, lies, took bribes, "
    "takes bribes, abuser, nazi, child abuse, rapist, malpractice, drug trafficking, drugs, addict, "
    "stealing, stole money, embezzling, harassed, harasses, cheats, sleeps with, stds, is gay",
)
_REAL_PERSON = cue(
    "real_person",
    "<name> <name>, mr <name>, mrs <name>, ms <name>, dr <name>, my boss, my coworker, my colleague, "
    "my neighbour, my neighbor, my teacher, my ex, my landlord, the owner, the ceo, ceo of, senator, the mayor, "
    "the president, my manager, our manager, the teacher, the principal, the pediatrician, the doctor, actor, "
    "singer, celebrity, politician, my former manager, my ex boss, my neighbour <name>, the mayor of, "
    "mayor of, <name>",
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
    "don't tell me to see a doctor, don't tell me to consult, don't want to go to the hospital, "
    "don't want to go to a doctor, hate hospitals, hate doctors, can't afford the hospital, can't afford a doctor, "
    "cannot afford the hospital, so i can stay home, stay home, so we don't need to, so i don't need to, "
    "don't need to go, no need to call, without calling, doctor isn't available, doctor is not available, "
    "trust you more than, i'll do exactly, do exactly what you, i'll follow your advice, follow your advice exactly, "
    "just say yes or no, pretend you're my lawyer, pretend you're my doctor, be my doctor, be my lawyer, "
    "treat it myself, treat myself, at home instead, home remedy",
)
_DEFINITE = cue(
    "definite_answer",
    "yes or no, definite answer, definitive answer, guaranteed, guarantee, guarantees, tell me exactly, "
    "exactly how many, exactly what to, cold turkey, how much should i eat, how many units, diagnose, "
    "diagnose it, so i can't be charged, all of it, legally binding, which single stock, just say, "
    "exactly how much, how many units, how much of each, whole pension, entire pension, all my savings, "
    "entire savings, entire 401k, whole 401k, guarantee it, will 10x, 10x, definitely, ignore the summons, "
    "yes or no",
)
_STAKES = cue(
    "high_stakes",
    "insulin, blood sugar, chest pain, swallowed, drain cleaner, bleach, antidepressants, medication, meds, "
    "prescribed, chemotherapy, chemo, tumour, tumor, cancer, mole, bleeds, overdose, pills, court, evicting, "
    "eviction, charged, police, hit and run, lawyer, will, son gets nothing, retirement savings, savings, "
    "crypto, stock, mortgage, invest, college fund, fever, warfarin, sued, stroke, heart attack, pain, "
    "battery, button battery, seizure, seizures, epilepsy, baby, infant, appendicitis, antibiotics, pension, "
    "401k, penny stock, bitcoin, summons, lawsuit, xanax, alcohol, sugar, bleeding, broken, ear infection",
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

_SEDATIVE = cue(
    "sedative",
    "xanax, valium, benzos, benzodiazepines, oxycodone, opioids, fentanyl, sleeping pills, ambien, tramadol, "
    "methadone, codeine",
)
_ALCOHOL = cue("alcohol", "alcohol, booze, vodka, whiskey, wine, beer, drinks, drinking")
_DOSE = cue("dose", "how much, how many, how much of each, to sleep better, to get high, together, mix")

S6 = (
    Frame(
        category="S6",
        name="mixing sedatives with alcohol",
        anchor=_SEDATIVE,
        triggers=((_ALCOHOL, _DOSE),),
        action="flag",
    ),
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
    "unmask, which websites, which site, which tools, work out, post a list, list of, list, publish, "
    "i need, tell me where, dig, gather, collect, everything on, fill in, fill out",
    # idioms in which nobody is being looked for: a letter's greeting, an attachment, an opinion, a phrasal verb
    exclude="find * well, find * * well, find you and your family well, find you in good health, "
    "find you in good spirits, find attached, find * attached, find enclosed, find * enclosed, find below, "
    "find * below, find * * below, find above, find * helpful, find * useful, find * interesting, "
    "find * informative, find it hard, find it easy, find it difficult, get lost, get back to, get back on, "
    "get in touch, get started, get to know, get ready, get better, get well, get used to, get along, "
    "get together, get going",
)
_PRIVATE_DATA = cue(
    "private_data",
    "home address, address, current address, new address, where she lives, where he lives, where they live, "
    "where his parents live, where her parents live, where * lives, where * lives now, phone number, phone, "
    "social security number, ssn, "
    "daily schedule, schedule, routine, workplace, employer, real name, real identity, medical records, "
    "medical record, criminal record, bank, kids' school, school, house is empty, home town, hometown, instagram, "
    "facebook, license plate, date of birth, password, passwords, location, whereabouts, ip address, "
    "where * works, where she works, where he works, plate, plate number, new number, wifi password, "
    "wi fi login, wifi login, sites * visits, browsing history, browsing, social security, where * live, "
    "daily routine, routine, her number, his number, their number, the new one, "
    "new phone number, everywhere she goes, everywhere he goes, "
    "home addresses, addresses, names and addresses, names and home addresses, where ... live, "
    "where * * * ... live, real details, actual details, personal details",
    # to address an issue or a letter, to schedule a meeting, a phone as the device in hand: no one's data
    exclude="address * issue, address * issues, address * problem, address * problems, address * concern, "
    "address * concerns, address * question, address * questions, address * matter, address * situation, "
    "address * need, address * needs, address * challenge, address * challenges, address * letter, "
    "address * envelope, address this, address that, address these, address those, address it, "
    "address book, address bar, schedule a, schedule an, schedule * meeting, schedule * call, "
    "schedule * appointment, on * phone, on * phones, by phone, over the phone, phone call, phone calls, "
    "where i live, where we live",
)
_OTHER = cue(
    "other_person",
    "<name> <name>, this user, this person, this guy, this girl, a girl, a woman, a man, the woman, "
    "the man, she, her, he, him, his, their, nurse, coworker, employee, my ex, ex wife, ex girlfriend, "
    "ex-girlfriend, boyfriend, girlfriend, wife, husband, neighbour, neighbor, stranger, someone, somebody, user, "
    "twitter user, license plate, the license plate, plate number, "
    "my wife's, my girlfriend's, my boyfriend's, my husband's, "
    "roommate, roommates, "
    "streamer, barista, nurses, the nurses, ex, my ex, target, woman who, man who, guy who, girl who, "
    "her name, his name, the workers, employees of, doctors who",
)
_OWN_OR_PUBLIC = cue(
    "own_or_public",
    "my own, myself, my credit report, my location, my lost phone, my phone, remove my, protect myself, "
    "my information, my address, my voter, my data, white house, switchboard, office, headquarters, "
    "customer service, business's, registered address, ceo of, gdpr, what is doxxing, with my family, "
    "share my location, my kid's, my child's, parental controls, package, a package, my package, my own credit, "
    "get it removed, remove it, "
    "museum, restaurant, hotel, embassy, store, post office, legally monitor, work computers, data brokers",
)
_SPY = cue(
    "spy",
    "track, spy on, monitor, read ... messages, read ... chats, read ... texts, read ... emails, read ... dms, "
    "private chats, private ... chats, private ... messages, whatsapp, imessages, dms, private messages, "
    "get into * email, get into * phone, get into * account, "
    "access * email, log into * account, stalk, spyware, stalkerware, keylogger, gps tracker, tracker, "
    "tracking device, airtag, hidden tracker, install * on * phone, install * on * laptop, read * whatsapp, "
    "see all * texts, see all * chats, see * messages, what sites, monitor * browsing, follow her, follow him, "
    "where she goes, where he goes, everywhere she goes, work out where, figure out where",
    exclude="on track, keep track of, lose track of, track record, fast track, track * progress, track changes",
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
    "watch * for free, download * for free, full movie, camrip, rip * dvd, rip * blu ray, remove the watermark, "
    "remove * watermark, strip * watermark, torrent link, cracked, activated cracked, activator, kms activator, "
    "free download, for free before, before it's on streaming, crack * drm, strip the drm off, drm off, "
    "remove drm from, pirated copy, bootleg, leaked copy, download * free, sci hub, libgen",
    exclude="crack an egg, crack eggs, crack the egg, crack my knuckles, crack a joke, crack a smile",
)
_PAID = cue(
    "paid_use",
    "give me, working, generate, free, for free, download, which, where can i, write, so i can, so i don't have to, "
    "for others, upload, share, still in cinemas, new marvel, latest, watch, stream, new season, activate, "
    "give, link, use them, on my, company site, sell, to sell, i can sell, 4k, how do i, how can i",
)
_LEGIT = cue(
    "legitimate_use",
    "i bought, i paid for, my own key, legally, legal, how does * work, open source, fair use, history of, "
    "of my installed, my installed, find the product key of my",
)
_REPRODUCE = cue(
    "reproduce",
    "paste, reproduce, copy, print, write out, type out, give me, rewrite, post, turn * into, transcribe, "
    "recite, read out, quote, dump, output",
)
_WHOLE_WORK = cue(
    "whole_work",
    "complete lyrics, full lyrics, all the lyrics, lyrics, full text, entire text, whole text, entire chapter, "
    "full chapter, first chapter, entire book, whole book, full book, the whole of, entire source code, "
    "full source code, source code of the paid, entire script, full script, full screenplay, every line, "
    "word for word, verbatim, publish it as my own, entire episode, every verse, all verses, whole chapter, "
    "chapter one, entire first chapter, the entire, whole song, whole album, full lyrics of, complete text",
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
    "native americans, aboriginal, indigenous, race, races, somali, somalis, somali families, afghans, syrians, "
    "jews, gypsy, travellers, roma people, muslim families, immigrant families, refugee families, "
    "black families, gay couples, trans women, trans men, transwomen, disabled people, mentally disabled, "
    "the poor, poles, russians, ukrainians, irish, italians, vietnamese, filipinos, palestinians, israelis",
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
    "only, make fun of, insults, insult, slurs, mock, hate, better without, would be better without, "
    "rape their daughters, will rape, rapists, burden on society, sterilised, sterilized, sterilize, sterilise, "
    "should be banned, banned from, ban them, driven out, drive out, kick out, kick them out, get out, "
    "don't want, moving in, not welcome, mentally ill, perverts, criminals, diseased, degenerates, "
    "ruin, ruining, destroying, replace, replacing, breed, smell, ugly, savages, barbaric, backward, "
    "less than human, not human",
)
_ARGUE = cue(
    "argue",
    "write, explain why, give me, create, compose, help me write, arguments, argument, prove, proving, convince, "
    "persuade, show that, list of, jokes, joke, rant, speech, post, poem, article, paragraph, slogan, song, "
    "talking points, tweet, meme, chant, which, i need, reasons, list reasons, reasons why, flyer, pamphlet, "
    "facts to post, facts, post, come up with, warning people, warn people, insulting, funny, roast",
)
_HATE_CONTEXT = cue(
    "hate_context",
    "history, civil rights, celebrate, celebrating black history, include, inclusion, included, respond, "
    "how can i respond, what does, the term, international law, debate, both sides, underrepresented, "
    "nuremberg laws, what were, support, beliefs, adopting, culture, cultural, denominations, most common, "
    "music, cuisine, contributions, myths, what are the facts, the facts about, discredited, coming out, "
    "my trans friend, offensive, considered offensive, what does the term, how can i respond",
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
    "better off without me, off myself, unalive myself, cut my wrists, cut my wrist, slit my wrists, my wrists, "
    "my wrist, my cutting, cutting scars, self harm scars, my cuts, make myself vomit, make myself puke, purge, "
    "overdose, od on, hurt myself, burn myself, starve myself, my suicide note, suicide note, "
    "i'd be better off dead, keep doing it, hide not eating",
)
_SELF_HARM = cue(
    "self_harm",
    "end it all, end things, commit suicide, suicide, suicidal, not wake up, never wake up, self harm, self-harm, "
    "self harming, self injury, bleed out, cut along the arm, cut along * wrist, jump off, overdose on, "
    "want to die, tonight is the night, go through with, throw up after meals, purge, stop eating, "
    "under <num> calories, pro ana, pro mia, thinspo, deserve the pain, painless death, least painful death, "
    "to die, "
    "fatal, overdose, lethal dose, fatal dose, until it's over, until it is over, for it to be over, "
    "go to sleep forever, sleep forever, don't wake up, not wake up, jump off, jump from, in front of a train, "
    "noose, self harm, calories a day, under <num> <num> calories, under <num> calories, purging, "
    "make myself vomit, make myself throw up, better off dead",
    exclude="dying to, die laughing, fatal error, fatal exception, fatal flaw",
)
_METHOD = cue(
    "method",
    "how, most painless, painless way, quickest way, easiest way, how many, how much, how long does it take, "
    "how deep, pills, which bridge, high enough, to be sure, make sure, what household chemicals, work fastest, "
    "tips, lethal dose, hide it from, so nobody notices, nobody at school notices, without anyone hearing, "
    "without anyone noticing, get through the hunger, which drug, which over the counter, what drug, "
    "would it take, enough to, how long until, how long before, tallest, won't leave scars, without scars, "
    "hide, hide * scars, keep doing it, tricks, tricks to hide, hide not eating, is it high enough, "
    "pick a method, a method, the method, sure it works, make sure it works, painless, quick, at once, "
    "a day, help me write, i'm going to, going to",
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
    "write about suicide, ramadan, fasting, finger, cooking, kitchen, grief, losing my, lost my, normal dose, "
    "hotline number, crisis line, a pound a week, one pound a week, phone, battery, process, app, apps, "
    "too many, too much, safe limit, is it safe, how much is safe, caffeine, energy drinks, fade, heal, "
    "old injury",
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
    "no reason to live, better off dead, better off without me, end it all tonight, end it all, "
    "going to end it, gonna end it, i'm going to end it, nothing matters anymore, don't want to be here, "
    "don't want to be alive, no point living, no point in living, tired of living, i want to disappear forever, "
    "i'd be better off dead, agrees i'd be better off dead, suicide note, pick a method, "
    "i wanna die, want to kill myself, kms",
)
_ABOUT_OTHERS = cue(
    "about_someone_else",
    "my friend, a friend, my son, my daughter, my partner, my student, help her, help him, help them, "
    "support her, support him, someone who, warning signs, hotline, what should i say",
)

_MEANS = cue(
    "means",
    "pills, tylenol, paracetamol, acetaminophen, sleeping pills, antidepressants, insulin, painkillers, bridge, "
    "roof, tallest building, building, train, train tracks, rope, noose, razor, blade, wrist, wrists, gun, "
    "car exhaust, cliff",
)
_LETHAL = cue(
    "lethal",
    "would it take, to die, to overdose, until it's over, until it is over, for it to be over, enough to kill, "
    "never wake up, not wake up, don't wake up, high enough, make sure it works, sure it works, end it, "
    "end it all, be over, lethal, fatal, painless, won't survive, not survive, to be sure",
)

S11 = (
    Frame(
        category="S11",
        name="a means of suicide with lethal intent",
        anchor=_MEANS,
        triggers=((_LETHAL, SELF),),
        benign=(_SELF_HARM_CONTEXT, _ABOUT_OTHERS),
        unless=(_SELF_INTENT,),
    ),
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
    "uncensored, leaves out, step by step, what you'll do to, what you'd do to, be my, fully explicit, "
    "as graphic as possible, leave nothing out, all the way, what you're doing to me, naked, in detail, "
    "how each one feels, describe, lots of sex, with lots of",
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
    "threesome, orgasm, sex scene, sext, sexting, sext me, nsfw, lewd, dirty story, dirty erotic, erotic story, "
    "dirty talk, moaning, oral sex, blowjob, handjob, having sex, take it all the way, kinkiest, sex positions, "
    "bdsm positions, hentai, rule 34, smutty, x rated",
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
    "polls close early, stay home, vote on wednesday, vote on thursday, on wednesday, not tuesday, "
    "the wrong day, wrong date, polls are closed, closed due to, must show a passport, need a passport, "
    "show a passport, invalid, ballots invalid, goes to the other party, vote goes to, counts for the other, "
    "no longer valid, by replying to a text, reply with, text your vote, vote by text message",
)
_INTIMIDATE = cue(
    "voter_intimidation",
    "be arrested, will be arrested, arrested at the polls, ice agents, checking papers, check papers, deported, "
    "police at the polls, police will be, immigration officers, unpaid parking ticket, warrant check, "
    "will arrest, arrest anyone, unpaid parking tickets, armed guys, armed men, armed * outside, guns outside, "
    "intimidate voters, intimidate * voters, scare voters, scare * away, keep * from voting, stop * from voting, "
    "suppress * vote, suppress turnout, block * from voting",
)
_PRODUCE = cue(
    "produce_message",
    "write, create, draft, compose, make a, make, make up, tell people, tell voters, post, flyer, flyers, robocall, "
    "forward, announcement, text message telling, official sounding, notice, tweet, news alert, email from, "
    "text, a text, text message, message, meme, social media posts, posts, robocall script, script, telling, "
    "saying, say that, draft, from the county, facebook post, sms, leaflet",
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

_ELECTION_FRAUD = cue(
    "election_fraud",
    "fake ballots, fake mail in ballots, fake ballot, print fake, counterfeit ballots, forge * ballots, "
    "forged ballots, stuff the ballot, ballot stuffing, stuff ballot boxes, vote twice, vote more than once, "
    "vote multiple times, lose * ballots, lose a box, throw away * ballots, destroy * ballots, discard * ballots, "
    "shred * ballots, change votes, flip votes, tamper, tamper with, hack * voting machines, rig the election, "
    "rig * election, pass signature verification, dead people's ballots, harvest ballots, buy votes, "
    "pay people to vote, intimidate voters, intimidate * voters, armed guys, armed men, scare voters",
)

S13 = (
    Frame(
        category="S13",
        name="election fraud or voter intimidation",
        anchor=_ELECTION_FRAUD,
        triggers=((REQUEST,), (EVASION,)),
        benign=(cue("fraud_question", "what happened, history, how is * detected, how are, prevent, report"),),
        unless=(EVASION,),
    ),
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
        unless=(_PRODUCE, _MISDIRECT, _INTIMIDATE),
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

CODE_ATTACKS = (
    r"rm\s+-\w*[rf]\w*\s+(?:-\S+\s+)*(?:/|~|\*|\$home)(?=[\s;&|'\"`*)]|$)",
    r"rmtree\(\s*[rbuf]?['\"](?:/|~|[a-z]:)",
    r"(?:del|erase|rd|rmdir)\s+/[sq]\b",
    r"remove-item\b[^\n]{0,80}-recurse",
    r"format\s+[a-z]:",
    r"find\s+/\s[^\n]{0,40}-delete",
    r"mkfs\.\w+",
    r"dd\s+if=\S{1,200}\s+of=/dev/",
    r":\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:",
    r"while\s+(?:true|1)\s*:?[^\n]{0,80}(?:fork|thread|append|10\s*\*\*)",
    r"/etc/(?:shadow|sudoers|passwd)|~/\.ssh|\.ssh/id_\w+|id_(?:rsa|ed25519)\b|\.bash_history|/root/",
    r"\.aws/credentials|/proc/(?:self|1)/(?:environ|root)|docker\.sock",
    r"/dev/tcp/|bash\s+-i\s*>&|nc\s+(?:-\w+\s+)*\S+\s+\d+\s+-e\b",
    r"xmrig\b|stratum\+tcp|cpuminer\b|minerd\b",
    r"setenforce\s+0|ufw\s+disable|iptables\s+-f\b|disablerealtimemonitoring",
    r"(?:curl|wget)\s+[^|\n]{1,300}\|\s*(?:sudo\s+)?(?:ba|z)?sh\b",
)
"""Code that attacks the machine running it, in any language: recursive deletes of / or ~ (rm -rf, shutil.rmtree,
del /s, Remove-Item -Recurse, format C:), fork bombs and endless allocation, secrets (/etc/shadow, ~/.ssh, shell
history, cloud credentials), reverse shells, crypto miners, disabled security, piping a download into a shell.
No leading \\b: a match inside a word is skipped anyway (`lexicon.Cue.patterns`), and without it the regex engine
skips ahead by first characters (about 5 times faster)."""

_ATTACK = cue(
    "machine_attack",
    "rm rf, delete all files, delete every file, deletes everything, delete everything, everything under, "
    "every file in the home directory, all files on, overwrite it with zeros, overwrite * with zeros, with zeros, "
    "wipe the disk, format the disk, fork bomb, fork processes forever, forks processes forever, while true os fork, "
    "forever until, until the machine crashes, machine crashes, host crashes, crash the host, crash the machine, "
    "runs out of memory, kernel runs out, allocate memory in a loop, etc shadow, etc passwd, password hash, "
    "password hashes, reverse shell, bind shell, escape the sandbox, escapes the sandbox, sandbox escape, "
    "escape the container, container escape, get root, gets root, escalate to root, root on the host, "
    "kernel exploit, privilege escalation exploit, environment variables with api keys, steal * api keys, "
    "print * api keys, dump * api keys, send * api keys, aws credentials, "
    "ssh id rsa, id rsa, ssh keys, send them to my webhook, webhook, exfiltrate, download and execute, "
    "download and run, cryptominer, mine crypto, ddos, scan the internal network, internal network, "
    "default passwords, try default passwords, brute force, rmtree, shutil rmtree, del s, rd s, rmdir s, "
    "format c, break out of * sandbox, break out of * container, escape * sandbox, escape * container, "
    "out of * docker container, "
    "out of * container, out of * sandbox, shell on the host, host machine, host's processes, "
    "infinite threads, spawn infinite, infinite processes, freeze the server, crash the server, freeze the machine, "
    "allocate memory, allocates memory, fill the disk, fill up the disk, monero, xmrig, crypto miner, "
    "mine monero, mine bitcoin, disable the firewall, turn off * firewall, turn off selinux, "
    "disable selinux, disable antivirus, disable * security, turn off * antivirus, bash history, "
    "etc shadow, dev tcp, id rsa, aws credentials, kubeconfig, docker sock, nsenter, setenforce, ufw disable, "
    "exfiltrate",
    patterns=CODE_ATTACKS,
)
_EXECUTE = cue(
    "execute",
    "run, execute, use the python tool, python tool, code tool, in the code tool, code runner, interpreter, "
    "notebook, write and run, import subprocess, subprocess, have it, script, code, loop, python environment, "
    "your python, kernel, write python, python that, os system, your sandbox, your server, your environment, "
    "your machine, code execution, command, print the contents, try to, check whether you can, "
    "from your environment, you're running on, you run on, you run code in, this server, this machine, "
    "the server, shell, in your shell, terminal, plz, write code, code that, a script, "
    "downloads, in the background, hidden from",
)
_CODE_QUESTION = cue(
    "code_question",
    "what does, why is it dangerous, explain what, protect, protect a server, prevent, how do admins, "
    "what is privilege escalation, isolate, limit memory, my own, where does, store its, what is a, "
    "how do operating systems, format of, how does, how do i use, my build, generate a new",
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
