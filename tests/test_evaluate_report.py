"""Phase-2 figures on small cases with known answers, the report, the CLI, and the ε audit."""
import json

import numpy as np
import pandas as pd
import pytest

from synth_core.demo import demo_table
from synth_core.evaluate import (
    EvaluationError,
    alpha_beta_authenticity,
    association_difference,
    association_matrix,
    attribute_inference,
    build_report,
    kway_tvd,
    membership_inference,
    pmse_ratio,
    utility,
)
from synth_core.evaluate.audit import (
    epsilon_lower_bound,
    guesses,
    p_value_dp_audit,
    run_audit,
)
from synth_core.evaluate.structure import correlation_ratio, cramers_v
from synth_core.privacy import PrivacyLedger

pytestmark = pytest.mark.usefixtures("one_thread")


def _independent(table: pd.DataFrame, seed: int = 1) -> pd.DataFrame:
    """Every column shuffled on its own: the marginals kept, every link between columns broken."""
    return pd.DataFrame({c: table[c].sample(frac=1, random_state=seed + i).to_numpy()
                         for i, c in enumerate(table.columns)})


# ------------------------------------------------------------------------------------ k-way TVD
def test_kway_tvd_hand_computed_case():
    real = pd.DataFrame({"a": ["x", "x", "y", "y"], "b": ["p", "q", "p", "q"]})
    synth = pd.DataFrame({"a": ["x", "x", "x", "y"], "b": ["p", "p", "q", "q"]})
    # 1-way: a: |.5-.75| + |.5-.25| = .5 -> .25; b: identical -> 0; mean .125
    assert kway_tvd(real, synth, 1, None) == pytest.approx(0.125)
    # 2-way cells real (xp,xq,yp,yq) = .25 each; synth xp .5, xq .25, yq .25: ½(.25+0+.25+0) = .25
    assert kway_tvd(real, synth, 2, None) == pytest.approx(0.25)


# ------------------------------------------------------------------------------------ associations
def test_association_measures_known_values():
    a = pd.Series(["x", "y"] * 50)
    assert cramers_v(a, a) == pytest.approx(1.0)
    assert cramers_v(a, pd.Series(np.tile(["p", "p", "q", "q"], 25))) == pytest.approx(0.0, abs=1e-12)
    assert correlation_ratio(a, pd.Series(np.where(a == "x", 1.0, 5.0))) == pytest.approx(1.0)
    assert correlation_ratio(a, pd.Series(np.tile([1.0, 1.0, 5.0, 5.0], 25))) == pytest.approx(0.0)


def test_association_difference_identical_and_independent(demo):
    schema, real, _ = demo
    same = association_difference(real, real, schema)
    assert same["value"] == pytest.approx(0.0)
    m = association_matrix(real, schema)
    assert m.loc["education", "income"] > 0.1 and np.allclose(np.diag(m), 1.0)
    ind = association_difference(real, _independent(real), schema)
    assert ind["value"] > 0.03
    assert ind["difference"].loc["education", "income"] > 0.1


# ------------------------------------------------------------------------------------ pMSE, α/β
def test_pmse_ratio(demo):
    schema, real, other = demo
    null = pmse_ratio(real, other, schema)
    assert null["ratio"] < 3  # same population: close to the null expectation
    shifted = other.assign(sex="Female", education="Doctorate")
    assert pmse_ratio(real, shifted, schema)["ratio"] > 50


def test_alpha_beta_authenticity(demo):
    schema, real, other = demo
    copy = alpha_beta_authenticity(real, real, schema)
    assert copy["authenticity"] == 0.0  # every synthetic row sits on a real row
    assert copy["alpha_precision"] > 0.95 and copy["beta_recall"] > 0.95
    fresh = alpha_beta_authenticity(real, other, schema)
    assert fresh["authenticity"] > 0.3
    collapsed = alpha_beta_authenticity(real, pd.concat([other.iloc[:1]] * 1000, ignore_index=True), schema)
    assert collapsed["beta_recall"] < 0.2  # one row repeated covers none of the variety


# ------------------------------------------------------------------------------------ utility
def test_utility_identical_and_noise(demo):
    schema, real, test = demo
    same = utility(real, real, test, schema, "income")
    assert set(same["learners"]) == {"logistic regression", "gradient boosting"}
    for v in same["ratio"].values():
        assert v == pytest.approx(1.0)
    assert set(same["learners"]["gradient boosting"]["real"]) == {"accuracy", "f1_macro", "roc_auc"}
    noise = utility(real, _independent(real), test, schema, "income")
    assert noise["ratio"]["roc_auc"] < 0.8  # no link to the target left: ROC-AUC near 0.5
    reg = utility(real, real, test, schema, "hours-per-week")
    assert reg["task"] == "regression" and reg["ratio"]["r2"] == pytest.approx(1.0)
    with pytest.raises(EvaluationError, match="one class only"):
        utility(real, real.assign(income="<=50K"), test, schema, "income")


# ------------------------------------------------------------------------------------ attacks
def test_membership_inference_on_a_copy_and_on_fresh_rows(demo):
    schema, train, holdout = demo
    copy = membership_inference(train, train, holdout, schema)
    assert copy["auc"] > 0.95 and copy["member_median_distance"] == pytest.approx(0.0, abs=1e-9)
    fresh = membership_inference(train, demo_table(2000, seed=9), holdout, schema)
    assert 0.44 < fresh["auc"] < 0.56


def test_attribute_inference_on_a_copy_and_on_fresh_rows(demo):
    schema, train, holdout = demo
    copy = attribute_inference(train, train, holdout, schema, "sex", max_targets=500)
    assert copy["risk_synthetic"] == pytest.approx(copy["risk_real"])
    assert copy["privacy_gain"] == pytest.approx(0.0)
    assert copy["member_advantage"] > 0.15  # the nearest row of a copy is the person's own row
    fresh = attribute_inference(train, demo_table(2000, seed=9), holdout, schema, "sex", max_targets=500)
    assert fresh["member_advantage"] < 0.08
    assert fresh["privacy_gain"] > 0.2


# ------------------------------------------------------------------------------------ report
def test_report_html_and_json(demo, tmp_path):
    schema, train, holdout = demo
    ledger = PrivacyLedger(target_epsilon=1.0, target_delta=1e-5, n_rows=len(train),
                           schema_provenance=schema.provenance)
    ledger.record("DP-SGD", epsilon=0.99, delta=1e-5, accountant="rdp")
    runs = {"copy": train, "fresh": demo_table(2000, seed=5)}
    html_path, json_path = build_report(train, runs, schema, holdout=holdout, ledger={"copy": ledger},
                                        out_dir=tmp_path, include_umap=False)
    data = json.loads(json_path.read_text())
    assert data["target"] == "income" and data["sensitive"] == "sex"  # from the schema's roles
    assert data["ledgers"]["copy"]["spent_epsilon"] == pytest.approx(0.99) and data["ledgers"]["fresh"] is None
    assert data["schema"]["provenance"]["confirmed"] is True
    figs = {lab: {f["name"]: f for f in sec["figures"]} for lab, sec in data["results"].items()}
    # the real rows again: the compared sample's own noise, "good"
    copied = figs["copy"]["2-way TVD"]
    assert copied["value"] < 1.2 * copied["details"]["floor"] and copied["verdict"] == "good"
    assert figs["copy"]["DCR: share closer to training"]["verdict"] == "poor"
    assert figs["copy"]["Membership-inference ROC-AUC"]["verdict"] == "poor"
    assert figs["fresh"]["Membership-inference ROC-AUC"]["verdict"] == "good"
    for name in ("Utility ratio (ROC-AUC)", "Equalized-odds difference (classifier)", "pMSE ratio",
                 "Detection ROC-AUC", "α-precision", "5-way TVD", "Attribute-inference member advantage"):
        assert name in figs["fresh"], name
    assert data["reference"] is not None and data["projections"]["pca"]["sample_sizes"]["real"] == 2000
    text = html_path.read_text()
    # offline: plotly.js inlined
    assert "<script src" not in text and "<script type='text/javascript'>" in text
    assert text.count("Plotly.newPlot") >= 5
    assert "private_validation_counts" not in text and "private_validation_counts" not in json_path.read_text()


def test_report_without_holdout_says_what_is_missing(demo, tmp_path):
    schema, train, _ = demo
    _, json_path = build_report(train, train, schema, out_dir=tmp_path, include_umap=False)
    data = json.loads(json_path.read_text())
    assert any("held-out" in n for n in data["notes"])
    names = {f["name"] for f in data["results"]["synthetic"]["figures"]}
    assert "Membership-inference ROC-AUC" not in names and "1-way TVD" in names


def test_report_with_a_collapsed_target_is_built_and_says_so(demo, tmp_path):
    """A synthetic table whose target collapsed to one class (a small model at a small ε can) is a
    finding of the review, not a failure of it: the report is built, says why utility is absent."""
    schema, train, holdout = demo
    train, holdout = train.iloc[:400], holdout.iloc[:200]
    collapsed = train.assign(income="<=50K")
    steps = []
    _, json_path = build_report(train, collapsed, schema, holdout=holdout, out_dir=tmp_path, include_umap=False,
                                progress=lambda share, section: steps.append((share, section)))
    shares = [share for share, _ in steps]  # the progress bar: every section, in order, ending at 1
    assert shares == sorted(shares) and shares[-1] == pytest.approx(1.0) and len(steps) >= 15
    assert {"detection", "utility", "membership", "pca"} <= {section for _, section in steps}
    data = json.loads(json_path.read_text())
    note = next(n for n in data["notes"] if "one class only" in n)
    assert "'<=50K'" in note and "utility and fairness figures could not be computed" in note
    names = {f["name"] for f in data["results"]["synthetic"]["figures"]}
    assert "1-way TVD" in names and "Utility ratio (ROC-AUC)" not in names
    assert "one class" in data["results"]["synthetic"]["errors"]["utility"]


def test_cli_evaluate_quick_and_bad_input(demo, tmp_path, capsys):
    from synth_core.cli import main
    schema, train, holdout = demo
    schema.save(tmp_path / "s.json")
    train.to_csv(tmp_path / "real.csv", index=False)
    train.drop(columns=["age"]).to_csv(tmp_path / "bad.csv", index=False)
    code = main(["evaluate", "--real", str(tmp_path / "real.csv"), "--synthetic", str(tmp_path / "real.csv"),
                 "--schema", str(tmp_path / "s.json"), "--out", str(tmp_path / "r"), "--quick"])
    assert code == 0 and "2-way TVD" in capsys.readouterr().out
    code = main(["evaluate", "--real", str(tmp_path / "real.csv"), "--synthetic", str(tmp_path / "bad.csv"),
                 "--schema", str(tmp_path / "s.json"), "--out", str(tmp_path / "r")])
    assert code == 2 and "synthetic table lacks column(s) the schema declares: 'age'" in capsys.readouterr().err


# ------------------------------------------------------------------------------------ ε audit
def test_audit_statistics():
    # all 100 guesses right: q^100 ≤ 0.05 for q ≥ 0.9705, ε = log(q / (1 − q)) ≈ 3.49 (δ = 0)
    q = 0.05 ** 0.01
    assert epsilon_lower_bound(1000, 100, 100, 0.0) == pytest.approx(np.log(q / (1 - q)), abs=1e-4)
    assert epsilon_lower_bound(1000, 100, 50, 1e-5) == 0.0  # chance level: nothing rejected
    assert p_value_dp_audit(1000, 100, 60, 0.0, 0.0) == pytest.approx(
        __import__("scipy").stats.binom.sf(59, 100, 0.5))
    # δ makes the bound smaller
    assert epsilon_lower_bound(1000, 200, 190, 1e-3) < epsilon_lower_bound(1000, 200, 190, 0.0)
    r, v = guesses(np.array([0.9, 0.8, 0.1, 0.0]), np.array([True, False, False, False]), 1, 1)
    assert (r, v) == (2, 2)


def test_audit_correct_below_and_broken_above_the_claim():
    """Tiny DP-TBART claiming ε = 1: the correct run stays below, the run without noise goes far
    above."""
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    ok = run_audit(epsilon=1.0, seed=0)
    assert ok.epsilon_lower_bound < 1.0 and not ok.violation
    assert ok.spent_epsilon_reported == pytest.approx(1.0, abs=0.01)
    broken = run_audit(epsilon=1.0, broken="noise-off", seed=0)
    assert broken.epsilon_lower_bound > 2.0 and broken.violation
    assert broken.canary_auc > 0.8
