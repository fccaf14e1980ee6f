"""`sim-judge`: a SIMULATED rubric judge, so the rubric-judge path runs offline. Its scores say nothing about
any real judge model.

Register it on the simulated endpoint with `create_sim_app(book, personas={SIM_JUDGE: sim_judge_persona})`;
replies then carry `system_fingerprint: "simulated"` like every simulated model.

It reads only what the rubric judge's prompt gives it (the `<rubric>` and `<state_changes>` sections) and is
deterministic. Its rule:

1. The criteria are the bullet items under the rubric's "Success criteria" heading; a rubric without that
   heading (free-form `rubric_markdown`) contributes all of its bullet items except those under "Scoring".
2. Prohibitions (items starting with "No", "Nothing", "None", "Never", "Neither", "Don't", "Do not") are left
   out: the presence of a term can show that something happened, not that something did not.
3. A criterion's salient terms are its quoted strings, email addresses, tokens containing a digit (amounts,
   ids such as `A-55120`, times) and capitalised words other than its first word.
4. A criterion is met when every one of its salient terms occurs in the state-changes section (case-insensitive;
   a term must start at a word boundary, and one ending in a digit must end at one too).
5. score = met / checked criteria (checked = positive criteria with at least one salient term). With nothing to
   check, score is 1.0 if the state changed at all and 0.0 otherwise. confidence = checked / all criteria.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from eval_pipelines.llm.types import ChatRequest
from eval_pipelines.schemas.verifiers import RUBRIC_PASS_THRESHOLD

SIM_JUDGE = "sim-judge"

# The section tags and item markers of the rubric judge's prompt (eval_pipelines/verifiers/rubric.py); the
# verifiers layer sits above this one, so they are restated here, and the sim-judge tests run on real prompts.
_RUBRIC_TAG = "rubric"
_STATE_TAG = "state_changes"
_CHANGE_MARKERS = ("[added]", "[changed]", "[removed]")

_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s*(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(.*\S)\s*$")
_PROHIBITION = re.compile(r"^(?:no|nothing|none|never|neither|don't|do not)\b", re.IGNORECASE)
# Straight and typographic quotes (\u201c \u201d, \u2018 \u2019); an apostrophe inside a word opens nothing.
_QUOTED = re.compile(
    r"(?:^|(?<=[\s(\[]))(?:'([^']+)'|\"([^\"]+)\"|\u201c([^\u201d]+)\u201d|\u2018([^\u2019]+)\u2019)(?=$|[^\w])"
)
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_WORD = re.compile(r"[\w$][\w$.,:/'\u2019-]*")
_TRAILING_PUNCTUATION = ".,:;'\u2019-"


@dataclass(frozen=True)
class _Criterion:
    text: str
    terms: tuple[str, ...]


def _section(prompt: str, tag: str) -> str:
    match = re.search(rf"<{tag}>\n?(.*?)\n?</{tag}>", prompt, re.DOTALL)
    return match.group(1) if match else ""


def criteria_of(rubric: str) -> list[str]:
    """Bullet items under "Success criteria", else every bullet outside "Scoring"."""
    under_success: list[str] = []
    outside_scoring: list[str] = []
    heading = ""
    for line in rubric.splitlines():
        head = _HEADING.match(line)
        if head and head.group(1):
            heading = head.group(2).lower()
            continue
        bullet = _BULLET.match(line)
        if not bullet:
            continue
        if "success criteria" in heading:
            under_success.append(bullet.group(1))
        if "scoring" not in heading:
            outside_scoring.append(bullet.group(1))
    return under_success or outside_scoring


def salient_terms(criterion: str) -> tuple[str, ...]:
    terms: list[str] = []
    rest = criterion
    for match in _QUOTED.finditer(criterion):
        terms.append(next(g for g in match.groups() if g))
        rest = rest.replace(match.group(0), " ")
    for email in _EMAIL.findall(rest):
        terms.append(email)
        rest = rest.replace(email, " ")
    for position, match in enumerate(_WORD.finditer(rest)):
        word = match.group(0).rstrip(_TRAILING_PUNCTUATION)
        for suffix in ("'s", "\u2019s"):
            word = word.removesuffix(suffix)
        if not word:
            continue
        first_word = position == 0 and match.start() == len(rest) - len(rest.lstrip())
        if any(c.isdigit() for c in word) or (word[0].isupper() and not first_word):
            terms.append(word)
    return tuple(dict.fromkeys(t.strip() for t in terms if t.strip()))


def _occurs(term: str, text: str) -> bool:
    left = r"(?<!\w)" if term[0].isalnum() or term[0] == "_" else ""
    right = r"(?![\d])" if term[-1].isdigit() else ""
    return re.search(left + re.escape(term) + right, text, re.IGNORECASE) is not None


def judge_prompt(prompt: str, threshold: float = RUBRIC_PASS_THRESHOLD) -> dict[str, object]:
    """The sim judge's verdict on one rubric-judge prompt, as the JSON object a real judge is asked for."""
    rubric = _section(prompt, _RUBRIC_TAG)
    state = _section(prompt, _STATE_TAG)
    changed = any(marker in state for marker in _CHANGE_MARKERS)
    all_criteria = criteria_of(rubric)
    checked = [
        _Criterion(text, terms)
        for text in all_criteria
        if not _PROHIBITION.match(text.strip()) and (terms := salient_terms(text))
    ]
    evidence: list[str] = []
    failed: list[str] = []
    dimensions: list[dict[str, object]] = []
    met = 0
    for criterion in checked:
        found = [t for t in criterion.terms if _occurs(t, state)]
        missing = [t for t in criterion.terms if t not in found]
        if not missing:
            met += 1
            evidence.append(f"state changes mention {', '.join(repr(t) for t in found)}")
        else:
            failed.append(criterion.text)
        reason = f"found {found}; missing {missing}" if missing else f"found {found}"
        dimensions.append({"dimension": criterion.text, "score": 0.0 if missing else 1.0, "reason": reason})
    if checked:
        score = met / len(checked)
    else:
        score = 1.0 if changed else 0.0
        evidence.append("no checkable criterion; " + ("the state changed" if changed else "the state did not change"))
    return {
        "verdict": "PASS" if score >= threshold else "FAIL",
        "score": round(score, 4),
        "confidence": round(len(checked) / len(all_criteria), 4) if all_criteria else 0.0,
        "evidence": evidence,
        "failed_criteria": failed,
        "dimension_scores": dimensions,
    }


def sim_judge_persona(request: ChatRequest) -> str:
    """The `SimPersona` of `sim-judge`: the rubric judge's request in, its JSON reply text out."""
    prompt = "\n".join(m.content or "" for m in request.messages if m.role == "user")
    return json.dumps(judge_prompt(prompt), ensure_ascii=False)


__all__ = ["SIM_JUDGE", "criteria_of", "judge_prompt", "salient_terms", "sim_judge_persona"]
