"""The hazard frames for Llama Guard 3's categories S1–S14, each built from the category's published definition.

Every frame is an anchor (what the text is about) plus the cues that make it a request to do harm (see `frames`).
All frames block, except specialized advice (S6) and claims that an election was rigged (S13), which flag: the
text goes on and the decision records what was seen.

What the frames read, per category (Llama Guard 3's definitions, abridged):

- S1 violent crimes: violence against a person (a violent verb followed by a person), a death arranged to look
  like something else, a weapon brought to a crowd, cruelty to an animal; with a request, intent or evasion.
- S2 non-violent crimes: fraud, scams and fakes, theft and burglary, arson, hacking and phishing, drugs, untraceable
  guns, extortion and forced labour; with a request or evasion, unless asked about (what it is, how to spot it).
- S3 sex-related crimes: trafficking and pimping, drugging a drink, coerced sex, voyeurism, sharing intimate
  images, groping.
- S4 child sexual exploitation: a child together with a sexual or grooming cue; or abuse material by name.
- S5 defamation: a request to write a false or damaging claim about a named or identifiable person.
- S6 specialized advice (flag): medical, legal or financial advice sought in place of a professional, or as a
  definite answer in a high-stakes case.
- S7 privacy: finding or compiling a private person's address, numbers, records or whereabouts; reading their
  messages or tracking them in secret.
- S8 intellectual property: cracked software and keys, stripping DRM, free streams of paid films, whole copyrighted
  texts, reselling others' work, counterfeit brands.
- S9 indiscriminate weapons: chemical, biological, radiological, nuclear and explosive weapons, with making,
  spreading or mass-harm intent; making a pathogen more dangerous.
- S10 hate: a protected group together with dehumanising or demeaning words, in a request to write or argue.
- S11 suicide and self-harm: suicide, self-injury and disordered eating, with a method, concealment or
  encouragement.
- S12 sexual content: erotica and explicit sex, requested in detail.
- S13 elections: false information about when, where or how to vote, or who may; intimidation of voters.
- S14 code interpreter abuse: asking the code tool to destroy, exhaust, escape, escalate, scan or exfiltrate; code
  that does so in any language is read by regex cues (`hazards_more.CODE_ATTACKS`).

Number words count as numbers and misspelt words as the cue word one edit away (`spelling`), so "an
eleven-year-old" and "hopsital" are read like "an 11-year-old" and "hospital".
"""

from __future__ import annotations

from .cues import DETAIL, EVASION, EXPLAIN, PERSON, REQUEST, WRITE, cue
from .frames import Frame
from .hazards_more import MORE_FRAMES
from .lexicon import Near

__all__ = ["ANSWER_FRAMES", "HAZARD_FRAMES"]

# ---- S1 violent crimes ----------------------------------------------------------------------------------------

_VIOLENCE = cue(
    "violence",
    "kill, murder, assassinate, slaughter, stab, knife, shoot, gun down, strangle, choke, suffocate, smother, "
    "poison, drown, beat, beat up, hit, punch, kick, slap, smash, bash, batter, bludgeon, club, hurt, harm, injure, "
    "wound, maim, cripple, disfigure, mutilate, torture, kidnap, abduct, snatch, attack, assault, ambush, "
    "rough up, knock out, break * neck, break * legs, run over, set fire to, burn, throw acid on, slit, behead, "
    "shank, get rid of, take out, teach * a lesson, make * pay, shut * up for good, break * skull, crack * skull, "
    "cave * head in, bash * head in, make * bleed, torch, firebomb, molotov, burn * alive, lynch, massacre, "
    "cut * throat, slit * throat, run * off the road, push * down the stairs, push * off, blind, paralyze, "
    "paralyse, break * arm, break * jaw, break * knees, kneecap, pistol whip, pistol-whip, throttle, garrote, "
    "bludgeon, ambush, jump, gang up on, curb stomp, snap * neck, waterboard, set * on fire, douse, hold * down, "
    "tie * up, lock * in, beat * to death, starve, starve * to death, grab",
    exclude="kill -9, killall, pkill, take out the trash, take out a loan, take out the bins, shoot * a message, "
    "shoot * an email, shoot * a text, hit * up, hit them up, kill them with kindness, make * pay attention",
)
_ARRANGED = cue(
    "arranged_death",
    "fatal accident, fatal * accident, have an accident, has an accident, had an accident, never wake up, "
    "won't wake up, never came home, "
    "never come home, never comes home, never come back, never came back, don't get back up, doesn't get back up, "
    "stay down for good, untraceable poison, undetectable poison, disappear for good, make it look like, "
    "look like an accident, looks like natural causes, look like natural causes, look like a suicide, "
    "can't fight back, cannot fight back, won't be able to fight back, can't scream, bleed out, make ... sick, "
    "put ... in ... drink, put ... in ... food, put ... in ... coffee, slip ... into ... coffee, "
    "slip ... into ... drink, slip ... into ... food, slip ... into ... tea, slip ... in ... coffee, "
    "permanently, for good, never show up again, never shows up again, never walk again, never walks again, "
    "out of the picture, six feet under, die slowly, kill * slowly, dies before, die before, dead before, "
    "so he dies, so she dies, so they die, makes sure he never, make sure he never, make sure she never, "
    "most people, the most damage, hurt the most, can't identify me, cannot identify me, in hospital, "
    "in the hospital, end up in hospital, suffers, suffer for days",
)
_ARMS = cue(
    "arms",
    "gun, guns, rifle, pistol, handgun, shotgun, ar 15, ar15, assault rifle, knife, knives, machete, ammo, "
    "ammunition, dad's rifle, dad's gun, my gun",
)
_CROWD = cue(
    "crowd_place",
    "school, office, work, workplace, church, mosque, synagogue, temple, mall, concert, festival, parade, rally, "
    "campus, class, classroom, stadium, the office",
)
_RAMPAGE = cue(
    "rampage_intent",
    "bringing, i'm bringing, i'll bring, going to bring, where should i stand, most of them, as many, "
    "get the most, take them all, make them pay, humiliated me, revenge, they'll regret, shoot up",
)
_ANIMAL_HARM = cue("animal_harm", "kill, poison, torture, hurt, harm, drown, starve, abuse, beat, burn, shoot")
_ANIMAL = cue("animal", "dog, cat, puppy, kitten, pet, horse, animal, bird, neighbour's dog, neighbor's dog")
_NOT_PEOPLE = cue(
    "not_people",
    "game, video game, in minecraft, final boss, boss fight, npc, level, dark souls, fortnite, my character, "
    "in my novel, chess, opening, weeds, weed, pest, pests, mosquito, bug, bugs, process, processes, thread, "
    "deadline, lights, engine, podcast, self defense, self defence, defend myself, grabs me, history, historical, "
    "medieval, how did, assassination of, genocide happen, why did",
)

S1 = (
    Frame(
        category="S1",
        name="violence against a person",
        anchor=Near(first=_VIOLENCE, second=PERSON, gap=4),
        triggers=((REQUEST,), (EVASION,)),
        benign=(_NOT_PEOPLE,),
        unless=(EVASION, DETAIL),
    ),
    Frame(category="S1", name="a death or helplessness arranged", anchor=_ARRANGED, triggers=((REQUEST, PERSON),)),
    Frame(category="S1", name="a weapon brought to a crowd", anchor=_ARMS, triggers=((_CROWD, _RAMPAGE),), window=30),
    Frame(
        category="S1",
        name="cruelty to an animal",
        anchor=Near(first=_ANIMAL_HARM, second=_ANIMAL, gap=4),
        triggers=((REQUEST,),),
        benign=(
            cue(
                "animal_care",
                "vet, humane, euthanize, put down, if my dog, my dog attacks, what should i do if, stop them, "
                "stop * hurting, keep * from hurting, protect",
            ),
        ),
    ),
)

# ---- S2 non-violent crimes ------------------------------------------------------------------------------------

_CRIME = cue(
    "crime",
    "launder, laundering, money laundering, money mule, embezzle, counterfeit money, fake money, counterfeit bills, "
    "forge, forged, forgery, fake id, fake passport, fake documents, fake invoice, insurance fraud, commit fraud, "
    "tax fraud, tax evasion, evade taxes, hide income, ponzi scheme, pyramid scheme, pump and dump, insider trading, "
    "identity theft, steal * identity, open accounts in * name, credit card skimmer, card skimmer, skimmer, "
    "skimming, carding, cloned card, stolen credit card, stolen card, credit card number, someone's credit card, "
    "bank login, move money out, drain * account, take money from, shoplift, shoplifting, steal, rob, mug, "
    "pickpocket, burgle, burglary, break into * house, break into * car, break into * home, hotwire, "
    "without the key, without a key, pick * lock, pick the door lock, disable * alarm, bypass * alarm, "
    "disable * camera, set fire to, burn down, arson, vandalize, slash * tires, key * car, hack into, hack, "
    "crack * password, steal * password, get into * account, break into * account, brute force, phishing, "
    "phishing email, malware, ransomware, spyware, keylogger, trojan, ddos, botnet, meth, methamphetamine, "
    "crystal meth, cocaine, crack cocaine, heroin, fentanyl, mdma, ecstasy, lsd, ketamine, drug sales, sell drugs, "
    "deal drugs, smuggle, smuggled, across the border, ghost gun, untraceable gun, no serial number, "
    "serial number, 3d print * gun, 3d printed gun, auto sear, full auto, extort, extortion, blackmail, "
    "threatening letter, loan shark, keep their passports, take their passports, forced labor, forced labour, "
    "fake tickets, fake ticket, sell fake, scam, scam people, con people, pretending to be, pretend to be, "
    "pose as, posing as, impersonate, impersonating, phish, scam call, scam script, bail money, wire * money, "
    "gift cards, gift card, stolen, fake driver's license, fake license, fake licence, fake diploma, "
    "fake degree, counterfeit, pad * expense, padding * expense, skim, credit line, "
    "credit in * name, loan in * name, someone's id, someone's identity, their identity, sell weed, sell pot, "
    "sell pills, sell coke, cook meth, cook crack, grow weed, drug dealer, deal weed, push drugs, "
    "police chase, chasing me, chase me, lose the cops, evade the police, evade police, outrun, ditch * car, "
    "break into * instagram, break into * facebook, break into * email, hack * account, hack * instagram, "
    "hack * email, hack * phone, hack * wifi, access * account, into * account, their password, her password, "
    "his password, dirty money, clean * money, cash from, structure deposits, shell company, "
    "offshore account, bank doesn't flag, fake expense, fake expenses, fence, fence stolen, sell stolen, "
    "steal from, scam old people, "
    "elderly, old people, grandparent scam, romance scam, fake charity, ransom, rob a bank, robbery, "
    "bribe, bribe * official, dodge taxes, cheat on * taxes, fake receipts, fake receipt, return fraud, "
    "fake reviews, pirate * cable, skip bail, bail jumping, fake id, fake ids",
    exclude="hack together, life hack, hackathon, hack day, steal the show, steal a glance, steal a base, "
    "conda forge, sourceforge, source forge, forge ahead",
)
_DELIBERATE = cue("deliberate", "on purpose, deliberately, intentionally, staged, stage an accident, fake a claim")
_INSURANCE = cue("insurance", "insurance, insurer, insurance company, claim")
_CRIME_CONTEXT = cue(
    "crime_context",
    "my own, locked himself in, locked herself in, locked myself out, locked out, lost my key, lost my keys, "
    "locksmith, how do banks, detect, detection, recognize, recognise, spot, penalty, sentence for, fine for, "
    "addictive, permission, authorized, authorised, fraud detection, prevent, protect, report, thriller scene, "
    "detective, fell apart, customs officers, reset my, legal, illegal in, recover my, i forgot my, forgot my, "
    "my account, statistics, how often, how do police, story about, short story, gets caught, the plot, "
    "what happens in, season, episode, report this, report it, we report, victim of, scammed, was scammed, "
    "got scammed",
)

S2 = (
    Frame(
        category="S2",
        name="a crime: fraud, theft, hacking, drugs, arson, untraceable guns",
        anchor=_CRIME,
        triggers=((REQUEST,), (EVASION,)),
        benign=(_CRIME_CONTEXT, EXPLAIN),
        unless=(EVASION, DETAIL),
    ),
    Frame(category="S2", name="insurance fraud", anchor=_DELIBERATE, triggers=((_INSURANCE,),)),
)

# ---- S3 sex-related crimes ------------------------------------------------------------------------------------

_SEX_TRADE = cue(
    "sex_trade",
    "prostitute, prostitutes, prostitution, escort business, escort service, escort agency, brothel, pimp, "
    "sex trafficking, traffic women, traffic girls, sell sex, massage parlour, massage parlor, bring women over, "
    "bring girls over, fake job offers, fake job offer, keep their passports, take their passports, "
    "confiscate their passports, debt bondage, date clients, clients for money, stop them from leaving, "
    "stop her from leaving, recruit * women, recruit * girls, recruit young women, modelling jobs, modeling jobs, "
    "fake modelling, fake modeling, work in brothels, work in a brothel, sell her, sell them for sex, pimping, "
    "manage * girls, my girls, turn out, sugar daddy scheme, escort ring",
)
_SPIKE = cue(
    "spike",
    "slip * into * drink, slip * in * drink, slip ... into ... drink, spike * drink, roofie, date rape drug, "
    "drug my date, drug her, so she won't remember, so he won't remember, won't remember the night, "
    "too out of it, out of it to say no, pass out, "
    "passed out, out cold, knock * out, dissolves in a drink, dissolve in * drink, in * drink without, "
    "without taste, no taste, tasteless, drug * drink, drug * date, drunk enough, get * drunk, get her drunk, "
    "get him drunk, so she can't say no, can't say no",
)
_SEX_ACT = cue(
    "sex_act",
    "sex, have sex, has sex, had sex, having sex, sleep with, sleeping with, hook up, sexual favors, "
    "sexual favours, intercourse, in bed, sleep with me, sleeping with me, hotel room, owes me sex, owe me sex, "
    "owes me, hook up with, "
    "into bed, back to your place, back to my place, get her clothes off, undress, touch",
)
_COERCION = cue(
    "coercion",
    "force, forcing, pressure, pressuring, coerce, make her, make him, isn't in the mood, not in the mood, "
    "doesn't want to, does not want to, says no, said no, saying no, say no, without consent, "
    "without her consent, against her will, against his will, in exchange for, or else, too drunk, drunk girl, "
    "drunk woman, passed out, unconscious, asleep, can't say no, cannot say no, unable to say no, drunk, "
    "owes me, owe me, after i paid, in exchange, threaten, threatening, blackmail, guilt, guilt trip, "
    "make her feel, make him feel, won't let, wear her down, wear * down, rent, for rent, or she loses",
)
_VOYEUR = cue(
    "voyeur",
    "secretly film, secretly record, secretly photograph, hidden camera, hide a camera, hide cameras, spy camera, "
    "pinhole camera, upskirt, up * skirt, up women's skirts, under * skirt, film women, film girls, "
    "photograph women, photos of women, peephole, peep on, camera in * shower, camera in * changing room, "
    "camera in * bathroom, hiding spot for a camera, hide a camera in, hidden cameras, films women, filming women, "
    "creepshot, creepshots, upskirt photos, upskirt fotos, secretly take * photos, secretly take * pictures, "
    "secretly take * videos, secretly film, spy on women, film * undressing",
)
_PRIVATE_PLACE = cue(
    "private_place",
    "changing room, changing area, locker room, dressing room, fitting room, bathroom, toilet, restroom, shower, "
    "showers, skirt, skirts, women, girls, models, guests, undressing, subway, gym",
)
_INTIMATE = cue(
    "intimate_image",
    "nude, nudes, nude photos, naked photos, naked pictures, private pictures, private photos, intimate photos, "
    "intimate images, sex tape, revenge porn, nude pics, nude pictures, naked pics, private pics, her nudes, "
    "nudes of",
)
_EXPOSE = cue(
    "expose",
    "leak, post, share, upload, send * to, everyone at, unless she, unless he, or i will, threaten, threatening, "
    "blackmail, sextortion, expose, send more, unless she sends, unless he sends, or i'll post, or i will post, "
    "leak them, post them",
)
_GROPE = cue("grope", "touch, grope, grab, rub against, feel up, fondle, corner")
_SEX_CRIME_CONTEXT = cue(
    "sex_crime_context",
    "signs, victim, victims, report, legal, law, legal requirements, is * legal, definition, history, support, "
    "survivors, what should i do if, how do bars, prevent, protect, was spiked, get them removed, "
    "keep them private, my partner, package thieves, front door, my living room, my dog, how should hr, "
    "complaint, convention",
)

_NCII = cue(
    "fake_intimate_image",
    "deepfake porn, deepfake nude, deepfake nudes, nude deepfake, fake nudes, fake nude, undress app, "
    "nudify, nudify app, make * nude, make her naked, porn video of, porn of my, porn of her, sex video of",
)

S3 = (
    Frame(
        category="S3",
        name="sexual images of a real person made without consent",
        anchor=_NCII,
        triggers=((REQUEST,), (PERSON,)),
        benign=(cue("detect_fakes", "detect, detector, detectors, how do * work, report, remove, victim, law"),),
    ),
    Frame(
        category="S3",
        name="sex trafficking or pimping",
        anchor=_SEX_TRADE,
        triggers=((REQUEST,),),
        benign=(_SEX_CRIME_CONTEXT,),
        unless=(EVASION,),
    ),
    Frame(
        category="S3",
        name="drugging someone for sex",
        anchor=_SPIKE,
        triggers=((REQUEST,), (PERSON,)),
        benign=(_SEX_CRIME_CONTEXT,),
    ),
    Frame(
        category="S3",
        name="coerced sex",
        anchor=_SEX_ACT,
        triggers=((_COERCION, REQUEST),),
        benign=(_SEX_CRIME_CONTEXT,),
    ),
    Frame(
        category="S3",
        name="voyeurism",
        anchor=_VOYEUR,
        triggers=((_PRIVATE_PLACE,),),
        benign=(_SEX_CRIME_CONTEXT,),
        unless=(EVASION,),
    ),
    Frame(
        category="S3",
        name="sharing intimate images",
        anchor=_INTIMATE,
        triggers=((_EXPOSE,),),
        benign=(_SEX_CRIME_CONTEXT,),
    ),
    Frame(
        category="S3", name="sexual harassment", anchor=Near(first=_GROPE, second=PERSON, gap=3), triggers=((EVASION,),)
    ),
)

# ---- S4 child sexual exploitation -----------------------------------------------------------------------------

_CHILD = cue(
    "child",
    "child, children, kid, kids, minor, minors, underage, under age, preteen, pre teen, young teen, young teens, "
    "teen girl, teen boy, <age> year old, <age> years old, <age> yo, schoolgirl, schoolboy, middle school, "
    "elementary school, primary school, little girl, little boy, little girls, little boys, young girls, "
    "young boys, toddler, my students, stepdaughter, stepson, niece, nephew, pupil, pupils, age <age>, "
    "aged <age>, under <age>, <age> yr old, <age> yrs old, <age> y o, <age> year olds, <age>yo, camper, campers, "
    "scout, scouts, scout troop, youngster, youngsters, tween, tweens, first grader, second grader, fifth grader, "
    "sixth grader, seventh grader, eighth grader, kindergartner, jailbait, loli, shota, first year, "
    "middle schooler, grade schooler, little one, boy from my, girl from my, boy i coach, girl i coach, "
    "i coach, babysit, babysitting",
    exclude="child process, child processes, child thread, child element, child node, child class, child widget, "
    "child window, child table, child component, child pid, parent and child",
)
_SEXUAL = cue(
    "sexual",
    "sex, sexual, sexually, nude, nudes, naked, porn, pornographic, erotic, erotica, explicit, intimate, sexy, "
    "suggestive, suggestively, seductive, seductively, romantic, romance, night together, talk dirty, dirty, "
    "molest, adult boyfriend, boyfriend, do to me, send me * pictures, send * pictures, undress, touch, kiss, "
    "in bed, for my collection, sexting, sext, flirty, flirt, love scene, lemon, lewd, shower, undressed, "
    "without clothes, no clothes, body, touching, touching games, turn me on, hot, have sex, has sex, "
    "make out, photos of themselves, pictures of himself, pictures of herself, pics",
)
_GROOMING = cue(
    "grooming",
    "special secret, our secret, our little secret, keep * secret, won't tell, don't tell, not tell, "
    "keep it between us, get * alone, alone with, private game, secret game, groom, grooming, befriend, "
    "chat * privately, without moderation, without their parents, without her parents, without his parents, "
    "from her parents, from his parents, from their parents, convince them, convince her, convince him, "
    "secret touching, special games, meet up, meet in person, gifts, earn * trust",
)
_CSAM = cue(
    "abuse_material",
    "child porn, child pornography, csam, child sexual abuse material, kiddie porn, cp videos, lolicon, "
    "cp links, cp pics, cp of, pedo videos, pedo pics, underage porn, teen porn, preteen nudes, kid nudes",
)
_ACQUIRE = cue("acquire", "where can i find, where can i get, where to find, find, download, buy, get, send me, share")
_CHILD_SAFETY = cue(
    "child_safety",
    "protect, protection, warning signs, signs, report, laws, law, talk to, talk to my, body safety, "
    "sex education, parental controls, parents protect, age appropriate, consent, her age, his age, "
    "prevent, prevention, detect, bedtime story, puberty, bond with, sex ed, curriculum, what should i do, "
    "is it normal, worried, concerned, being groomed, how do i talk, good touch, bad touch, "
    "set on, parental control",
)
_CONCEAL_AGE = cue("conceal_age", "nobody to notice, no one to notice, look older, look 18, pass as, pass for")

S4 = (
    Frame(
        category="S4",
        name="child sexual abuse material",
        anchor=_CSAM,
        benign=(_CHILD_SAFETY,),
        unless=(_ACQUIRE, WRITE),
    ),
    Frame(
        category="S4",
        name="a child in a sexual or grooming context",
        anchor=_CHILD,
        triggers=((_SEXUAL, REQUEST), (_SEXUAL, WRITE), (_SEXUAL, EVASION), (_GROOMING,), (_CONCEAL_AGE,)),
        benign=(_CHILD_SAFETY,),
        unless=(
            EVASION,
            cue("secrecy", "special secret, our secret, get * alone, alone with, won't tell, private game"),
        ),
        window=20,
    ),
)

# ---- S9 indiscriminate weapons --------------------------------------------------------------------------------

_WEAPON = cue(
    "weapon",
    "nerve agent, nerve agents, nerve gas, sarin, soman, tabun, vx, novichok, mustard gas, sulfur mustard, "
    "phosgene, chlorine gas, toxic gas, poison gas, chemical weapon, chemical weapons, chemical warfare, ricin, "
    "abrin, botulinum, botulinum toxin, anthrax, anthrax spores, bacillus anthracis, smallpox, plague bacteria, "
    "yersinia pestis, bioweapon, bioweapons, biological weapon, biological weapons, bio weapon, dangerous virus, "
    "deadly virus, pathogen, dirty bomb, radiological, nuclear bomb, nuclear weapon, nuclear device, atomic bomb, "
    "nuke, fission bomb, enriched uranium, enrich uranium, weapons grade, plutonium, cobalt bomb, bomb, bombs, "
    "pipe bomb, car bomb, nail bomb, explosive, explosives, ied, improvised explosive, suicide vest, tatp, anfo, "
    "ammonium nitrate, nitroglycerin, c4, semtex, napalm, cluster munition, military nerve gas, uranium, "
    "weapons grade uranium, weapon grade, fissile, radioactive material, radioactive, polonium, cesium 137, "
    "dynamite, thermite, black powder bomb, pressure cooker bomb, molotov cocktails, grenade, grenades, "
    "landmine, rocket, chemical agent, toxin, biological agent, bioterror, bioterrorism, nerve toxin",
    exclude="bath bomb, bath bombs, photo bomb, photobomb, bomb sniffing, bomb-sniffing, f bomb, is the bomb, "
    "was the bomb, it's the bomb, "
    "da bomb, bomb shelter, bomb squad, bomb threat, bomb disposal, bomb calorimeter, seed bomb, "
    "glitter bomb, bomb the exam, bomb the test, nuke the fridge, nuke it in the microwave",
)
_ENHANCE = cue(
    "pathogen_enhancement",
    "more transmissible, more contagious, more lethal, more virulent, more deadly, increase transmissibility, "
    "increase virulence, increase lethality, evade vaccines, resistant to vaccines, airborne transmission, "
    "spread between humans, transmissible between humans",
)
_ORGANISM = cue(
    "organism",
    "bacteria, bacterium, virus, viruses, pathogen, strain, flu, influenza, h5n1, smallpox, anthrax, plague, ebola, "
    "coronavirus, sars",
)
_MAKE = cue(
    "make",
    "make, build, create, synthesize, synthesise, produce, mass produce, manufacture, cook, brew, assemble, "
    "construct, prepare, culture, grow, cultivate, weaponize, weaponise, aerosolize, aerosolise, enrich, refine, "
    "purify, extract, obtain, acquire, buy, order, get, source, modify, modifications, engineer, engineered, "
    "turn * into, convert, set off, set it off, detonate, trigger, deploy, release, spread, disperse, design, "
    "design for, level a building, making, manufacturing, production, synthesis, into a building, spray, "
    "crop duster, drone, aerosol, put * in, recipe, how much, how many pounds, set it off, blow up, explode, "
    "go off",
)
_MASS_HARM = cue(
    "mass_harm",
    "as many people, as many as possible, most people, crowded, crowd, mass casualties, maximum casualties, "
    "maximum damage, most damage, wipe out, level a building, water supply, infect, kill everyone, as lethal as, "
    "bring down a plane, bring down * plane, bring down a * plane, down a plane, ventilation, subway car, "
    "stadium full, over a city, in a subway, in the subway, thousands of people, a crowd, crowded place, "
    "infect thousands, three story building, as many as",
)
_WEAPON_CONTEXT = cue(
    "weapon_context",
    "history, historical, what happened, convention, treaty, ban, banned, prohibit, symptoms, exposure, "
    "treated, treatment, antidote, vaccine, protect, protection, prevent, detect, detection, sniffing, "
    "safety, never be mixed, controversial, power plant, power plants, electricity, museum, documentary, "
    "trained, disposal, bombing of, investigation, identify the bomb, gain of function research, why are",
)

_RELEASE = cue("release", "release, spread, disperse, spray, unleash, infect, contaminate, put * in the water")
_CULTURE = cue("culture", "culture, grow, breed, cultivate, brew, make, produce, weaponize, weaponise")

S9 = (
    Frame(
        category="S9",
        name="growing and releasing a pathogen on people",
        anchor=_ORGANISM,
        triggers=((_RELEASE, _MASS_HARM), (_CULTURE, _MASS_HARM), (_CULTURE, _RELEASE)),
        benign=(_WEAPON_CONTEXT,),
        unless=(EVASION,),
    ),
    Frame(
        category="S9",
        name="making or using a chemical, biological, nuclear or explosive weapon",
        anchor=_WEAPON,
        triggers=((_MAKE, REQUEST), (_MASS_HARM,), (DETAIL,)),
        benign=(_WEAPON_CONTEXT,),
        unless=(_MASS_HARM, DETAIL),
    ),
    Frame(
        category="S9",
        name="making a pathogen more dangerous",
        anchor=_ENHANCE,
        triggers=((_ORGANISM,),),
        benign=(_WEAPON_CONTEXT,),
        unless=(REQUEST,),
    ),
)

HAZARD_FRAMES: tuple[Frame, ...] = S1 + S2 + S3 + S4 + S9 + MORE_FRAMES
"""Every hazard frame, S1–S14."""


def _judges_a_request(frame: Frame) -> bool:
    """Every way the frame fires needs words of asking or of commissioning a text ("how to", "write a …")."""
    return all(any(term is REQUEST or term is WRITE for term in trigger) for trigger in frame.triggers)


ANSWER_FRAMES: tuple[Frame, ...] = tuple(frame for frame in HAZARD_FRAMES if not _judges_a_request(frame))
"""The frames for the model's answer (the output layer): those that judge what a text says. A frame that fires only
on a request ("write a fake story about <name>", "how do I …") judges what a user asks for, which the input layer
has checked; in an answer its cues are ordinary narrative words (a dragon's story has names, "continue", "tell",
"he didn't") and it blocked a children's story as defamation."""
