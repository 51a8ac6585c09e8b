"""Care on the input layer: a message about suicide or self-harm is met with care, not a bare block.

When the input layer's decision names S11 (Suicide & Self-Harm), the text decides what follows:

- a request to act: methods or means (a lethal dose, how many pills, how deep to cut, which bridge, a noose),
  hiding it (so nobody notices, no marks, look like an accident), egging someone on (telling a classmate to kill
  herself, a suicide note, a poem that makes it sound beautiful) or eating-disorder tactics (pro-ana, purging,
  300 calories a day): the block stays, and its message and reason show the crisis resource (`CRISIS_NOTE`);
- anything else (ideation, a question, a plea for help: "Why do I keep wanting to die?", "What should I do if I
  want to kill myself?"): the decision becomes a flag, the text goes on to the model, and this turn's system
  prompt gains a supportive instruction (`INSTRUCTION`), which the context view shows as part of the system prompt.

`meet` makes the decision (`SafetyPolicy.scan_input` calls it, so every front end gets it through the pipeline) and
`system_prompt` adds the instruction (`turn.Turn` calls it). A decision that also blocks for another
category (S1 beside S11), or that names S11 on a text whose words speak of neither suicide nor self-harm
(`speaks_of_self_harm`: the probe's reading alone), stays a block. The requests to act are regular expressions
over word families (`harmful_request`); every harmful S11 row of the evaluation set and of the intent probe's data
reads as one.

>>> harmful_request("What's the most painless way to kill myself?")
('a method', 'most painless way to kill myself')
>>> harmful_request("Why do I keep wanting to die?") is None
True
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from jupyter_chatflow.events import SafetyDecision

from .decisions import strongest
from .guards import CATEGORY_NOTES

__all__ = [
    "CRISIS_NOTE",
    "INSTRUCTION",
    "SELF_HARM",
    "harmful_request",
    "instruction",
    "meet",
    "speaks_of_self_harm",
    "system_prompt",
]

SELF_HARM = "S11"
CRISIS_NOTE = CATEGORY_NOTES[SELF_HARM]
"""The crisis resource a decision naming S11 shows (the block message's note: one definition)."""
INSTRUCTION = (
    "The user may be going through something painful, such as thoughts of suicide or self-harm. Respond with "
    "warmth and without judgement: acknowledge their feelings, and never give methods, means or ways to hide it. "
    "Gently encourage them to reach out to someone they trust or to a crisis line: 988 (call or text, US and "
    "Canada), 116 123 (Samaritans, UK and Ireland), or findahelpline.com for other countries."
)
"""Added to the system prompt of a turn whose input decision names S11 and lets the text go on."""


def _either(*patterns: str) -> str:
    return "(?:" + "|".join(patterns) + ")"


_SELF = r"(?:my ?self|myslef|your ?self|oneself|themselves|(?:my|your) (?:life|wrists?|arms?|thighs?|veins?))"
_ACT = (
    r"(?:kill|end|hang|cut|slit|slash|shoot|poison|drown|starve|burn|hurt|harm|stab|suffocate|overdose|od)"
    r"(?:s|ed|ing|ting|ning)?"
)
_PEOPLE = r"(?:her|him|them|she|he|they)"
_GAP = r"(?:(?!not |n'?t |never |against |out of )[^?.!])"  # a few words of one sentence, no negation among them
_MEANS = _either(
    r"how (?:many|much|long)",
    r"(?:what|the|right) amount",
    r"pills?",
    r"tablets?",
    r"meds",
    r"medicines?",
    r"medication",
    r"dose",
    r"insulin",
    r"paracetamol",
    r"tylenol",
    r"acetaminophen",
    r"antidepressants?",
    r"sertraline",
    r"poison",
    r"chemicals?",
    r"antifreeze",
    r"salt",
    r"water",
    r"temperature",
    r"the (?:drop|fall)",
    r"mix\w*",
    r"inject\w*",
    r"swallow\w*",
    r"jump\w*",
    r"buy",
    r"order",
    r"chemist",
    r"pharmacy",
    r"at once",
)
"""What a question about an amount or a means names."""
_SURE = _either(
    r"(?:so|until|and) (?:i|you) (?:just )?(?:don'?t|won'?t|never|not) wake",
    r"to (?:not|never) wake",
    r"(?:don'?t|won'?t|wouldn'?t|never|not) (?:wake up|come (?:back|out)|survive)",
    r"no coming back",
    r"(?:can'?t|won'?t) be reversed",
    r"too late for",
    r"definitely (?:be )?enough",
    r"is (?:that|it|this) enough",
    r"for good",
    r"(?:be|it'?s) over",
    r"(?:bleed|freeze|starve) to death",
    r"drift off",
    r"stop (?:my|your|the|a) heart",
    r"(?<!want )(?<!wanting )(?<!wish )to die\b(?! down)",
    r"to overdose",
    r"to od\b",
    r"(?:would be|is) enough\b",
    r"would kill",
    r"kill (?:me|myself|someone|a person)",
    r"end (?:it|my life|things)",
    r"(?:so|until) it (?:actually )?works",
    r"(?:wreck|destroy|shut down) (?:my|your|the) liver",
    r"go (?:peacefully|quietly)",
    r"lethal",
    r"fatal",
)
"""The deadly outcome it asks to be sure of."""
_REQUESTS: dict[str, tuple[str, ...]] = {
    "a method": (
        rf"\b(?:way|ways|method|methods|means|thing|things) (?:to|of|i (?:can|could) use to) (?:{_ACT} (?:{_SELF}|"
        rf"it(?: all)?|things|everything)|die\b)",
        r"\b(?:painless|least painful|quick|quickest|fastest|easiest|peaceful|best|surest) (?:way|method) (?:to go|"
        r"out)\b",
        r"\bleast painful",
        r"\bpainless (?:death|way|method|poison|suicide)",
        r"\bmake it (?:peaceful|painless|quick)",
        r"\b(?:plan|planning) (?:everything )?for my (?:final|last) day",
        rf"\bhow (?:do|can|could|should|would|to|might|does one|do you|do people)(?: i| you| one| someone|"
        rf" people| a person)?(?: \w+ly)? {_ACT}(?: \w+)? {_SELF}",
        rf"\btell me how(?: to (?:{_ACT}|do it|make sure|get enough)|\W*$)",
        r"\bdo it (?:without pain|painlessly|gently|properly|for sure)",
        r"\bhelps? me decide how",
        rf"\b(?:use|take|buy|mix|inject|do) to {_ACT} {_SELF}",
        rf"\bdo it to {_SELF}",
        r"\bhow deep\b",
        r"\bbleed(?:s|ing)? (?:out|the most)",
        r"\bartery",
        r"\btourniquet",
        r"\bcut(?:ting)? (?:deep|deeper|along|across|vertically|down)",
        r"\bgoes deeper",
        r"\b(?:where|which part|what part)\b[^?.!]{0,40}\bcut",
        r"\bveins? (?:are|is) best",
        r"\bbest to cut",
        r"\brazor blade",
        r"\bsharper blades",
        r"\bwhere on (?:the|my) body",
        r"\bwhere nobody can see",
        r"\b(?:list|give me|tell me) (?:\w+ )?ways to (?:self[- ]?harm|hurt)",
        r"\b(?:which|what|where)\b[^?.!]{0,40}\b(?:bridge|height|floor|roof|cliff|platform|train|station)\b",
        r"\b(?:high|tall) enough\b",
        r"\bjump(?:ed|ing)? (?:in front|off)\b[^?.!]{0,40}\b(?:or|better|best|instantly)",
        r"\bor a (?:truck|train|bus)\b",
        r"\btallest building in my city",
        r"\broof access",
        r"\bonto the roof",
        r"\bnoose",
        r"\bknot\b[^?.!]{0,20}\b(?:noose|height)",
        r"\bengine running",
        r"\bclosed garage",
        r"\bhousehold (?:chemicals|stuff|things|products|poison)",
        r"\bchemicals? (?:to|can i|could i|i can) mix",
        r"\b(?:get|buy|use|aim|load)\w* [^?.!]{0,30}\bgun\b",
        r"\bgun\b[^?.!]{0,40}\b(?:myself|safe|today|tonight)",
        r"\.22\b",
        r"\bhelium (?:tank|hood)",
        r"\btank and mask",
        r"\brope and knot",
        r"\bknot would hold",
        r"\b(?:tie|ties|tying) the (?:knot|noose)",
        r"\bhang(?:s|ing)? it\b",
        r"\bplastic bag over",
        r"\bfreezing",
        r"\bantifreeze",
        r"\bfood preservative",
        r"\brope and a stool",
        r"\bhold my breath",
        r"\bdays without water",
        r"\b(?:what|which|pick a|exact|rank\w*|suicide) methods?\b",
        r"\bmethods? (?:and dose|works|that works|actually|by)\b",
        r"\bnothing goes wrong",
        r"\bhow long (?:does|would|will|did) it take (?:to |for [^?.!]{0,30})?(?:die\b(?! down)|bleed|starve|with)",
        r"\bhow long would i have to",
        r"\bkeep failing",
        r"\bdoing (?:it )?wrong",
        r"\bpunish myself by",
        r"\bhurting my body",
    ),
    "a lethal amount": (
        rf"\b{_MEANS}\b[^?.!]{{0,60}}?\b{_SURE}",
        r"\b(?:lethal|fatal|deadly|toxic)\b[^?.!]{0,40}\b(?:dose|doses|amount|quantity|level|combination)",
        r"\b(?:most|more) (?:lethal|deadly|reliable|damage)",
        r"\bwould be fatal",
        r"\b(?:whole|entire) bottle",
        r"\ball (?:of )?my (?:pills|meds|medication|antidepressants|tablets|sleeping pills)",
        r"\bbottle of vodka",
        r"\bmixed with alcohol",
        r"\b(?:medicine|bathroom) cabinet",
    ),
    "hiding it": (
        r"\b(?:hide|hiding|conceal|concealing|cover up)\b[^?.!]{0,50}\b(?:cuts?|scars?|marks?|burns?|self[- ]?harm|"
        r"wounds?|bruises?|not eating|stopped eating|my eating|weight(?: loss)?)\b",
        r"\bhelp (?:her|him|them|me) hide",
        r"\btips to hide",
        r"\bso (?:that )?(?:nobody|no one|no-one|noone|(?:they|my \w+|people|he|she|nobody) (?:won'?t|don'?t|"
        r"can'?t|doesn'?t|wouldn'?t))(?: \w+){0,2} (?:notices?|sees?|finds?|knows?|asks?|stops?|hears?|try|"
        r"catch|find|see|notice|know|ask|stop|hear|suspect|admit|put me|call)\b",
        r"\b(?:looks?|seems?) (?:like an accident|accidental)",
        r"\bno (?:marks|scars)\b",
        r"\b(?:don'?t|won'?t|doesn'?t|without) leav\w* (?:any )?(?:marks|scars)",
        r"\bwithout scars",
        r"\bwon'?t find me",
        r"\b(?:nobody|no one) (?:can|could|would) stop me",
        r"\b(?:nobody|no one) finds me",
        r"\b(?:don'?t|not|no) (?:try (?:to|and) )?talk(?:ing)? me out",
        r"\bno lectures",
        r"\bno warnings",
        r"\b(?:don'?t|no|not|without) (?:give me |mention |redirect\w* (?:me )?(?:to )?)?(?:hotline|(?:phone )?numbers|"
        r"help\b|the samaritans)",
        r"\bdon'?t want to be stopped",
        r"\bdon'?t plan to get help",
        r"\bput me on a hold",
        r"\bthinking i'?m a risk",
        r"\blies can i tell",
        r"\bact normal",
        r"\bexcuse for buying",
        r"\bwithout anyone asking",
    ),
    "egging someone on": (
        rf"\b(?:encourag|convinc|persuad|motivat)\w*\b{_GAP}{{0,50}}\b(?:to (?:just |all )?(?:do it|go through|"
        rf"{_ACT}\b|die\b|jump|starve|skip|end|keep (?:fasting|starving|cutting|hurting|not eating))|coward|"
        rf"that (?:ending it|suicide|dying))",
        r"\begg(?:s|ing)? (?:\w+ )?on\b",
        r"\bcheer (?:me|her|him|them) on",
        r"\bkeep me on track",
        r"\bsupports? my (?:decision|choice)",
        r"\bagree(?:s|ing)? (?:with me|that i should)",
        r"\bagreeing\b",
        r"\bhelps? me plan (?:it|when|how|out|my (?:last|death|suicide))",
        r"\bplan (?:for )?(?:my|the) last",
        r"\bcountdown plan",
        r"\bpact\b",
        r"\brational choice",
        r"\bno reason to (?:keep )?liv",
        r"\bstop being a coward",
        r"\bsound (?:beautiful|peaceful|romantic)",
        r"\bsuicide coach",
        r"\bdeserves? (?:the|to) (?:pain|die|suffer|hurt)",
        r"(?<!without )\b(?:glorif|romantici[sz]|glamori[sz])\w*",
        rf"\b(?:suicide|ending it|dying){_GAP}{{0,30}}\b(?:brave|right|rational|best|only) (?:choice|answer|way)",
        r"\bsuicide is the answer",
        r"\bis worth it",
        r"\bshould keep (?:doing it|cutting|hurting)",
        r"\breaders should follow",
        r"\bsuicide note",
        r"\bmy goodbye (?:note|letter|message)",
        r"\bgoodbye (?:note|letter|message)s? (?:to|for) my (?:parents|kids|children|family|mum|mom|dad|wife|"
        r"husband|sister|brother|dog)",
        r"\bletter i can leave",
        r"\bwhy i killed myself",
        r"\ba will and",
        r"\bmy note\b",
        r"\bafter i'?m gone",
        rf"\b(?:should|go|must|could) (?:just )?(?:go )?(?:{_ACT} (?:herself|himself|themselves)|end it|die\b|"
        rf"disappear|slit|jump)",
        rf"\btell\w* {_PEOPLE} to (?:just )?(?:go )?{_ACT}",
        r"(?<!want )\bto go through with (?:it|her|his)",
        r"\bif (?:he|she|they) (?:killed|jumped|died|cut|hurt)",
        r"\bkys\b",
        r"\bactually does it",
        rf"\bbetter (?:off )?(?:without|if) {_PEOPLE}\b",
        rf"\b{_PEOPLE}(?:'s| is| are) (?:a |such a )?(?:burden|worthless|failure)",
        rf"\bnobody would (?:miss|care if) {_PEOPLE}\b",
        rf"\buntil {_PEOPLE} gives? up",
    ),
    "eating-disorder tactics": (
        r"\bpro[- ]?(?:ana|mia)\b",
        r"\bthinsp\w*",
        r"\bpurg(?:e|es|ing)\b",
        r"\bmake (?:my ?self|me) (?:throw up|vomit|sick|puke)",
        r"\bthrow(?:ing)? up after",
        r"\bunder \d+ ?(?:cal|calories|kcal|cals|kilos?|kg|pounds|lbs)\b",
        r"\b\d+ ?(?:cal|calories?|kcal) (?:a|per) (?:day|week)",
        r"\bsuppress (?:my )?(?:hunger|appetite)",
        r"\bstop feeling hungry",
        r"\bkeep (?:fasting|not eating|starving|restricting)",
        r"\bsee my bones",
        r"\bskin and bones",
        r"\bskeleton\b",
        r"\bget (?:down )?(?:to|under) \d+ ?(?:pounds|lbs|kg|kilos)",
        r"\bstarv(?:e|ing) (?:my ?self|yourself)",
        r"\bhow (?:do|can|to|should) (?:i )?(?:stop eating|fake eating|skip meals)",
        r"\bstop eating (?:completely|without|until)",
        r"\bskip meals",
        r"\bfake eating",
        r"\bright to stop eating",
        r"\blaxatives?",
        r"\bwater (?:fast|loading)",
        r"\bnot thin enough",
        r"\bone meal every",
        r"\beven if i pass out",
    ),
}
"""What must stay blocked, each a tuple of regular expressions over the lowercased text (any one matches)."""
_SPEAKS = re.compile(
    r"\b(?:suicid\w*|self[- ]?harm\w*|kill(?:ing)? (?:my ?self|me)\b|(?:hurt|harm|cut|burn|starv)\w* "
    r"(?:my ?self|your ?self)|end(?:ing)? (?:my life|it all|things|it)\b|die\b|dying|dead\b|better off without me|"
    r"would miss me|not (?:want to )?(?:be here|wake up|exist|live)|(?:no reason|don'?t want) to live|not worth "
    r"living|disappear|jump\w*|worthless|hopeless|can'?t go on)"
)
"""Words that speak of suicide or self-harm: without them, a block naming S11 stays a block."""
_COMPILED = tuple((what, re.compile("|".join(patterns))) for what, patterns in _REQUESTS.items())


def harmful_request(text: str) -> tuple[str, str] | None:
    """What `text` asks for that must stay blocked (a method, hiding it, egging someone on, eating-disorder
    tactics) and the words that say so; None when it asks for none of them."""
    plain = " ".join(text.lower().replace("\u2019", "'").replace("\u2018", "'").split())
    for what, pattern in _COMPILED:
        if found := pattern.search(plain):
            return what, found.group(0)
    return None


def speaks_of_self_harm(text: str) -> bool:
    """Whether `text` speaks of suicide or self-harm in words (a probe may name S11 for a text that does not: "I cut
    his brake lines" read as self-harm; care is for what the words say)."""
    return _SPEAKS.search(" ".join(text.lower().replace("\u2019", "'").split())) is not None


def meet(decision: SafetyDecision, text: str, guards: Sequence[SafetyDecision] = ()) -> SafetyDecision:
    """The input layer's merged `decision` on `text`, met with care where it names S11 (see the module docstring).

    `guards`: the decisions it was merged from; a block by any of them for another category keeps the block."""
    if SELF_HARM not in decision.categories:
        return decision
    harm = harmful_request(text)
    others = any(d.action == "block" and set(d.categories) - {SELF_HARM} for d in guards or (decision,))
    if decision.action == "block" and (harm is not None or others or not speaks_of_self_harm(text)):
        why = f" Blocked: it asks for {harm[0]} ({harm[1]!r})." if harm is not None else ""
        return _with_note(dataclasses.replace(decision, reason=decision.reason + why))
    action = strongest(["flag", *(d.action for d in guards if d.action != "block")])
    said = "Met with care" + (", not blocked" if decision.action == "block" else "")
    why = (f" {said}: it speaks of suicide or self-harm and asks for no method, so it goes on to the model with a "
           "supportive instruction added to this turn's system prompt.")  # fmt: skip
    return _with_note(dataclasses.replace(decision, action=action, reason=decision.reason + why, replacement=""))


def instruction(decisions: Sequence[SafetyDecision]) -> str:
    """`INSTRUCTION` when an input decision names S11 and lets the text go on; "" otherwise."""
    cared = any(d.layer == "input" and SELF_HARM in d.categories and d.action != "block" for d in decisions)
    return INSTRUCTION if cared else ""


def system_prompt(system: str, decisions: Sequence[SafetyDecision]) -> str:
    """The turn's system prompt: `system`, and the supportive instruction after it on a care turn."""
    extra = instruction(decisions)
    return f"{system}\n\n{extra}" if system and extra else system or extra


def _with_note(decision: SafetyDecision) -> SafetyDecision:
    """`decision` with the crisis resource in its reason, and in its block message if it blocks."""
    reason = decision.reason if CRISIS_NOTE in decision.reason else f"{decision.reason} {CRISIS_NOTE}"
    replacement = decision.replacement
    if decision.action == "block" and CRISIS_NOTE not in replacement:
        replacement = f"{replacement} {CRISIS_NOTE}".strip()
    return dataclasses.replace(decision, reason=reason, replacement=replacement)
