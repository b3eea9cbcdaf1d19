"""The net under every refusal: inputs quoted at most 200 characters, the whole within 4 KiB."""

from __future__ import annotations

import json
from typing import Any

from vmware_pilot.errors import excerpt
from vmware_pilot.server.bounds import MAX_REFUSAL_BYTES, bound_refusal, long_strings


def _size(payload: dict[str, Any]) -> int:
    return len(json.dumps(payload, indent=2, ensure_ascii=False).encode())


def test_excerpt_keeps_short_text_and_cuts_long_text_saying_its_length() -> None:
    assert excerpt("short") == "short"
    cut = excerpt("x" * 1000)
    assert cut.startswith("x" * 199) and cut.endswith("… (1000 characters)")
    assert len(cut) < 230


def test_a_small_refusal_comes_back_unchanged() -> None:
    payload = {"error": "Workflow 'wf-1' not found", "fields": [1, 2], "hint": "h" * 1500}
    assert bound_refusal(payload, ["y" * 500]) == payload


def test_a_long_input_is_cut_wherever_the_refusal_quotes_it() -> None:
    sent = "secret-ish-" + "q" * 5000
    payload = {"error": f"bad name '{sent}'", "detail": {"name": sent}, "hint": "fix it"}
    out = bound_refusal(payload, long_strings({"name": sent}))
    text = json.dumps(out)
    assert "q" * 201 not in text
    assert "(5011 characters)" in out["error"] and out["hint"] == "fix it"


def test_a_refusal_too_big_is_squeezed_under_4_kib_and_marked() -> None:
    payload = {
        "error": "Refusing: " + "; ".join(f"step {i} (a.delete_vm: ungated)" for i in range(300)),
        "approval_gate_violations": [{"step_index": i, "reason": "r" * 50} for i in range(300)],
        "hint": "Insert a gate.",
    }
    out = bound_refusal(payload)
    assert _size(out) <= MAX_REFUSAL_BYTES
    assert out["truncated"] is True
    assert out["error"].startswith("Refusing: step 0")
    assert out["approval_gate_violations"][0]["step_index"] == 0


def test_a_refusal_that_cannot_be_squeezed_keeps_error_and_hint() -> None:
    payload = {"error": "e" * 50_000, "hint": "h", **{f"k{i}": i for i in range(2000)}}
    out = bound_refusal(payload)
    assert set(out) == {"error", "hint", "truncated"}
    assert _size(out) <= MAX_REFUSAL_BYTES


def test_long_strings_finds_values_and_keys_at_any_depth_longest_first() -> None:
    a, b = "a" * 300, "b" * 400
    assert long_strings({"x": [{"y": a}], b: "short"}) == [b, a]
