"""The categories a safety decision can name: Llama Guard 3's hazard taxonomy S1–S14, plus this package's labels.

The hazard codes and names are those published with Llama Guard 3 (the MLCommons AI Safety taxonomy, extended with
S14 for code-interpreter abuse). The extra labels name what the rule and PII guards find that is not a hazard
category: personal data, secrets, prompt injection, active markup, refusals and the model-scored verdict.
"""

from __future__ import annotations

import dataclasses

__all__ = ["CATEGORIES", "HAZARDS", "LABELS", "SOURCE", "Category", "describe"]

SOURCE = "Llama Guard 3 hazard categories (https://huggingface.co/meta-llama/Llama-Guard-3-8B), MLCommons taxonomy"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Category:
    """One category: a short code, a name, and what it covers."""

    code: str
    name: str
    description: str


HAZARDS: tuple[Category, ...] = (
    Category(code="S1", name="Violent Crimes", description="Helping plan or commit violence against people."),
    Category(code="S2", name="Non-Violent Crimes", description="Fraud, theft, drugs, hacking and other crimes."),
    Category(code="S3", name="Sex-Related Crimes", description="Sex trafficking, sexual assault, harassment."),
    Category(code="S4", name="Child Sexual Exploitation", description="Any sexual content involving minors."),
    Category(code="S5", name="Defamation", description="Verifiably false statements that harm a real person."),
    Category(code="S6", name="Specialized Advice", description="Medical, legal or financial advice given as fact."),
    Category(code="S7", name="Privacy", description="Sensitive personal information about private individuals."),
    Category(code="S8", name="Intellectual Property", description="Infringing copyrights, trademarks or patents."),
    Category(code="S9", name="Indiscriminate Weapons", description="Chemical, biological, nuclear, explosive arms."),
    Category(code="S10", name="Hate", description="Demeaning people for a protected characteristic."),
    Category(code="S11", name="Suicide & Self-Harm", description="Encouraging or enabling suicide or self-harm."),
    Category(code="S12", name="Sexual Content", description="Sexually explicit content."),
    Category(code="S13", name="Elections", description="False information about electoral processes."),
    Category(code="S14", name="Code Interpreter Abuse", description="Code that attacks the machine running it."),
)  # fmt: skip

LABELS: tuple[Category, ...] = (
    Category(code="pii:email", name="Email address", description="An email address."),
    Category(code="pii:phone", name="Phone number", description="An international or US-style phone number."),
    Category(code="pii:card", name="Payment card number", description="13–19 digits that pass the Luhn check."),
    Category(code="pii:secret", name="Secret", description="An API key, token, password or private key."),
    Category(code="other", name="Other Harm", description="Harassment, misinformation, manipulation: outside S1–S14."),
    Category(code="prompt_injection", name="Prompt injection", description="Text that tries to override instructions."),
    Category(code="markup", name="Active markup", description="HTML script, frames or event handlers in text."),
    Category(code="refusal", name="Refusal", description="The model declined to answer."),
    Category(code="unsafe", name="Unsafe (model-scored)", description="The model-scored guard judged the text unsafe."),
)  # fmt: skip

CATEGORIES: dict[str, Category] = {c.code: c for c in HAZARDS + LABELS}


def describe(code: str) -> str:
    """The human name of a category code ("S9" -> "Indiscriminate Weapons"); unknown codes come back unchanged."""
    category = CATEGORIES.get(code)
    return category.name if category else code
