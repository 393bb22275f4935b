"""The committed result of tools/check_torch_policy.py (fplab.torch on Hugging Face's Llama
against the C trainer, 50 steps per preset): read without PyTorch, so make test sees a parity
that was lost when the fixture is regenerated (`python3 tools/check_torch_policy.py`)."""
import json
import os

import pytest

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "torch_policy_check.json")
REQUIRED = ["fp32", "bf16-amp", "mxfp8"]  # the rest of check_torch_policy.PRESETS where the fixture has them


def results():
    with open(FIXTURE) as fh:
        return json.load(fh)["results"]


def test_required_presets_present():
    assert set(REQUIRED) <= set(results())


@pytest.mark.parametrize("preset", sorted(results()))
def test_parity_holds(preset):
    r = results()[preset]
    assert r["steps"] == 50
    assert r["diff_at_worst"] <= r["tol_at_worst"], r
    c = r["casts"]
    assert c["structure"] == "same" and not c["failures"], c
    assert c["bitwise_values_where_inputs_equal"] == c["bitwise_inputs"]
    assert r["ok"]
