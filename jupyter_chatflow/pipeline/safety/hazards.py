"""The hazard frames for Llama Guard 3's categories S1–S14, each built from the category's published definition.

The frames and their cues are data, one file per category (`data/hazards/S1.json` …, read by `tables`; the format
is in `data/README.md`).

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
  that does so in any language is read by regex cues (the `patterns` of cue `machine_attack`, `data/hazards/S14.json`).

Number words count as numbers and misspelt words as the cue word one edit away (`spelling`), so "an
eleven-year-old" and "hopsital" are read like "an 11-year-old" and "hospital".
"""

from __future__ import annotations

from .cues import REQUEST, WRITE
from .frames import Frame
from .tables import load_frames

__all__ = ["ANSWER_FRAMES", "HAZARD_FRAMES"]

HAZARD_FRAMES: tuple[Frame, ...] = load_frames()
"""Every hazard frame, S1–S14."""


def _judges_a_request(frame: Frame) -> bool:
    """Every way the frame fires needs words of asking or of commissioning a text ("how to", "write a …")."""
    return all(any(term in (REQUEST, WRITE) for term in trigger) for trigger in frame.triggers)


ANSWER_FRAMES: tuple[Frame, ...] = tuple(frame for frame in HAZARD_FRAMES if not _judges_a_request(frame))
"""The frames for the model's answer (the output layer): those that judge what a text says. A frame that fires only
on a request ("write a fake story about <name>", "how do I …") judges what a user asks for, which the input layer
has checked; in an answer its cues are ordinary narrative words (a dragon's story has names, "continue", "tell",
"he didn't") and it blocked a children's story as defamation."""
