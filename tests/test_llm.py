"""DP-LLMTGen: text encoding, two-stage training (stage 1 from the public schema only, stage 2
DP-SGD on LoRA only), the numerical loss, value-specified and constrained sampling, save/load,
fairness by prompts. Everything runs offline: nothing may be downloaded."""
import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import json  # noqa: E402
import math  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from synth_core import api  # noqa: E402
from synth_core.release.fair_sampling import fair_sample  # noqa: E402
from synth_core.models import SamplingError, get_model_class  # noqa: E402
from synth_core.encoding import text as row_text  # noqa: E402
from synth_core.models import llm  # noqa: E402
from synth_core.privacy import PrivacyLedger  # noqa: E402
from synth_core.schema import ColumnSpec, Schema, validate_table  # noqa: E402

EPS, DELTA = 8.0, 1e-5


def schema_() -> Schema:
    return Schema(columns=[
        ColumnSpec("age", "integer", lower=18, upper=80),
        ColumnSpec("sex", "categorical", categories=["Female", "Male"]),
        ColumnSpec("job", "categorical", categories=["clerk", "nurse", "pilot"], nullable=True),
        ColumnSpec("hours", "continuous", lower=0.0, upper=100.0, decimals=1),
        ColumnSpec("income", "categorical", categories=["<=50K", ">50K"]),
    ])


def table_(n=500, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    sex = rng.choice(["Female", "Male"], n)
    job = np.where(sex == "Female", rng.choice(["nurse", "clerk"], n, p=[0.8, 0.2]),
                   rng.choice(["pilot", "clerk"], n, p=[0.8, 0.2])).astype(object)
    job[rng.random(n) < 0.05] = None
    income = np.where(rng.random(n) < np.where(sex == "Male", 0.6, 0.1), ">50K", "<=50K")
    table = pd.DataFrame({"age": rng.integers(20, 70, n), "sex": sex, "job": job,
                          "hours": np.round(rng.uniform(10, 60, n), 1), "income": income})
    return validate_table(table, schema_())[0]


def new_model(**options):
    return get_model_class("dp-llmtgen")(schema_(), preset="tiny", seed=0, **options)


@pytest.fixture(scope="module")
def fitted():
    """One tiny model through both stages, shared by the sampling tests."""
    model = new_model(stage1_rows=400, stage1_epochs=3)
    ledger = PrivacyLedger(EPS, DELTA, 500)
    model.fit(table_(), EPS, DELTA, "rdp", ledger=ledger)
    return model, ledger


# --- text encoding -------------------------------------------------------------------------------
def test_rows_round_trip_through_text():
    model = new_model()
    rows = table_(20)
    data = model.encode(rows)
    for i in range(len(rows)):
        ids = [t for t in data[i, 0].tolist() if t >= 0]
        assert ids[0] == model.codec.bos and ids[-1] == model.codec.eos
        text = model.tokenizer.decode(ids[1:-1])
        values, why = model.codec.parse(text)
        assert why is None, text
        for j, name in enumerate(model.schema.names):
            want = rows[name].iloc[i]
            if want is None or (isinstance(want, float) and np.isnan(want)):
                assert values[j] is None
            else:
                assert values[j] == want
    # the column order is permuted per row
    firsts = {int(data[i, 2, 1]) for i in range(len(rows))}
    assert len(firsts) > 1


def test_compact_rows_are_a_csv_line_after_a_header_read_once():
    """The compact format: the header names the columns once, each row is its values in schema
    order."""
    schema = schema_()
    codec = row_text.TextCodec(schema, row_text.build_schema_tokenizer(schema), "compact")
    decode = codec.tok.decode
    # no line break in its tokens
    assert decode(codec.prefix_ids + [codec.bos]) == "age,sex,job,hours,income:"
    # order ignored
    ids = codec.encode_row([39, "Male", None, 40.5, ">50K"], [4, 3, 2, 1, 0])[0].tolist()
    assert ids[0] == codec.bos and ids[-1] == codec.eos and decode(ids[1:-1]) == "39,Male,N/A,40.5,>50K"
    assert codec.parse("39,Male,N/A,40.5,>50K") == ([39.0, "Male", None, 40.5, ">50K"], None)
    assert codec.parse("39,Male,N/A,40.5") == (None, "column missing")
    assert codec.parse("39,Male,N/A,40.5,>50K,1") == (None, "malformed")
    assert codec.parse("39,Robot,N/A,40.5,>50K") == (None, "not a public category")
    assert set(codec.output_tokens()) >= {codec.eos, *codec.char_id.values(), *codec.next_ids[1]}
    # a prompt fixes leading columns only; the others are left to rejection
    assert codec.exact_prefix([0, 1, 3]) == [0, 1] and codec.exact_prefix([1, 2]) == []
    with pytest.raises(ValueError, match="leading columns"):
        codec.prompt_ids({1: "Male"}, None)
    # a category holding a comma moves the separator
    commas = Schema(columns=[ColumnSpec("city", "categorical", categories=["Paris, TX", "Rome"]),
                             ColumnSpec("n", "integer", lower=0, upper=9)])
    codec = row_text.TextCodec(commas, row_text.build_schema_tokenizer(commas), "compact")
    assert codec.sep == "|" and codec.parse("Paris, TX|7") == (["Paris, TX", 7.0], None)


def test_numbers_are_written_at_the_declared_precision():
    codec = new_model().codec
    assert codec.format_value(3, 12.345) == "12.3" and codec.format_value(0, 39.0) == "39"
    assert codec.format_value(2, None) == codec.missing


def test_parse_rejects_malformed_rows():
    codec = new_model().codec
    ok = "age is 39, sex is Male, job is pilot, hours is 40.5, income is >50K"
    assert codec.parse(ok)[1] is None
    bad = {
        "age is 39, sex is Male, job is pilot, hours is 40.5": "column missing",
        "age is 39, sex is Robot, job is pilot, hours is 40.5, income is >50K": "not a public category",
        "age is 139, sex is Male, job is pilot, hours is 40.5, income is >50K": "outside the public bounds",
        "age is 3x, sex is Male, job is pilot, hours is 40.5, income is >50K": "not a number",
        "age is 39.5, sex is Male, job is pilot, hours is 40.5, income is >50K": "not an integer",
        "age is 39, age is 40, sex is Male, job is pilot, hours is 40.5, income is >50K": "column repeated",
        "hello": "malformed",
        "age is 39, sex is N/A, job is pilot, hours is 40.5, income is >50K": "missing value in a column that is not nullable",
    }
    for text, reason in bad.items():
        assert codec.parse(text) == (None, reason), text


def test_malformed_generations_are_rejected_and_counted_never_returned(fitted, monkeypatch):
    model, _ = fitted
    codec = model.codec
    good = codec.prompt_ids({}, None) + codec._ids("age is 39, sex is Male, job is pilot, hours is 40.5, income is >50K") + [codec.eos]
    bad = codec.prompt_ids({}, None) + codec._ids("age is 39, sex is Robot") + [codec.eos]
    unfinished = codec.prompt_ids({}, None) + codec._ids("age is 39, sex is")

    def fake(prompts, states, generator, temperature=1.0):
        return [[good, bad, unfinished][i % 3] for i in range(len(prompts))]

    monkeypatch.setattr(model, "generate_ids", fake)
    table = model.sample(5, seed=0, constrained=False)
    assert len(table) == 5 and (table["sex"] == "Male").all() and (table["age"] == 39).all()
    info = model.last_sample_info
    assert info["rejected"]["not a public category"] > 0 and info["rejected"]["not finished"] > 0
    assert info["rows_tried"] == 5 + info["rejected_rows"] or info["rows_tried"] >= 5 + info["rejected_rows"]
    assert info["format_compliance_unconstrained"] < 0.5

    monkeypatch.setattr(model, "generate_ids", lambda prompts, *a, **k: [bad for _ in prompts])
    with pytest.raises(SamplingError, match="well formed"):
        model.sample(3, seed=0, constrained=False, max_tries_factor=2)


def test_number_automaton_keeps_values_inside_the_public_bounds():
    g = llm.Grammar(new_model().codec, "cpu")
    age, col3 = g.numbers[0].accepts, g.numbers[3].accepts
    assert age("") == (True, False)
    assert age("1") == (True, False)        # 18, 19
    assert age("18") == (True, True)
    assert age("17") == (False, False)
    assert age("9") == (False, False)       # 9 and 90..99 are outside [18, 80]
    assert age("80") == (True, True)
    assert age("-") == (False, False)
    assert age("018")[0] is False
    assert col3("100.0") == (True, True)
    assert col3("100.5")[0] is False
    assert col3("4.")[0] and not col3("4.")[1]
    assert col3("4.25")[0] is False           # one decimal declared


@pytest.mark.parametrize("lower, upper, decimals", [
    (18, 80, 0), pytest.param(0, 99_999, 0, marks=pytest.mark.slow), (-5, 5, 0), (-3.5, 12.25, 1), (-1, 1, 2), (0.5, 0.7, 1), (100, 100, 0),
    (-200, -10, 0), (0, 0, 0), (0, 0, 2), (-0.5, -0.1, 1), (3, 2, 0), (7, 1234, 1), (-7.3, 88.04, 2)])
def test_number_automaton_takes_exactly_the_prefixes_of_the_values_in_bounds(lower, upper, decimals):
    """Against every value inside the bounds written at the precision (as TextCodec.format_value
    writes it): a text is viable exactly when it is a prefix of one, complete exactly when it is
    one. Prefixes with the same futures share a state: the states stay few however many values a
    column has."""
    import itertools
    from synth_core.models.llm.numbers import NumberAutomaton
    s = 10 ** decimals
    units = range(math.ceil(lower * s - 1e-9), math.floor(upper * s + 1e-9) + 1)
    valid = {("-" if u < 0 else "") + (f"{abs(u) // s}.{abs(u) % s:0{decimals}d}" if decimals else str(abs(u)))
             for u in units}
    prefixes = {v[:i] for v in valid for i in range(len(v) + 1)}
    chars = "0123456789-."
    texts = {"".join(t) for n in range(4) for t in itertools.product(chars, repeat=n)}
    texts |= prefixes | {p + c for p in prefixes for c in chars}
    numbers = NumberAutomaton(lower, upper, decimals)
    assert {t: numbers.accepts(t) for t in texts} == {t: (t in prefixes, t in valid) for t in texts}
    states = set()
    for text in prefixes:
        state = numbers.start
        for ch in text:
            state = numbers.step(state, ch)
        states.add(state)
    assert len(states) <= 20  # 0 to 99,999: 100,001 prefixes, 6 states


# --- stage 1: the public schema only -------------------------------------------------------------
def test_stage1_reads_only_the_public_schema(monkeypatch):
    """Stage 1's rows come from random_table(schema); the private table is first touched by stage
    2."""
    model = new_model()
    # a private table random rows could never look like: every row the same person
    private = pd.DataFrame({"age": [42.0] * 300, "sex": ["Female"] * 300, "job": ["nurse"] * 300,
                            "hours": [37.5] * 300, "income": [">50K"] * 300})
    calls, encoded = [], []
    real_random = llm.model.random_table

    def spy_random(schema, n, seed=None, **kw):
        calls.append(("random_table", schema))
        out = real_random(schema, n, seed=seed, **kw)
        encoded.append(out)
        return out

    real_encode = model.encode

    def spy_encode(table, seed=None, **kw):
        calls.append(("encode", "private" if table is private else "random" if table is encoded[-1] else "?"))
        return real_encode(table, seed, **kw)

    real_learn = model.learn_format

    def spy_learn(should_stop=None):
        calls.append(("stage1",))
        out = real_learn(should_stop)
        calls.append(("stage1 done",))
        return out

    monkeypatch.setattr(llm.model, "random_table", spy_random)
    monkeypatch.setattr(model, "encode", spy_encode)
    monkeypatch.setattr(model, "learn_format", spy_learn)
    model.fit(private, EPS, DELTA, "rdp")
    assert calls[0] == ("stage1",) and calls[1][0] == "random_table" and calls[1][1] is model.schema
    assert calls[2] == ("encode", "random") and calls[3] == ("stage1 done",)
    assert calls[4] == ("encode", "private") and len(calls) == 5
    stage1 = encoded[0]
    # uniform over the public categories and bounds, nothing like the private rows
    assert 0.35 < (stage1["sex"] == "Female").mean() < 0.65
    assert stage1["age"].min() < 25 and stage1["age"].max() > 70


def test_cancel_during_stage1_never_reads_the_private_table(monkeypatch):
    model = new_model()
    ledger = PrivacyLedger(EPS, DELTA, 300)
    touched, private, real_encode = [], table_(300), model.encode

    def spy(table, seed=None, **kw):
        touched.append(table is private)
        return real_encode(table, seed, **kw)

    monkeypatch.setattr(model, "encode", spy)
    model.fit(private, EPS, DELTA, "rdp", ledger=ledger, should_stop=lambda: True)
    assert touched == [False] and model.train_result.cancelled and model.train_result.steps_done == 0
    assert ledger.spent_epsilon == 0.0


# --- stage 2: DP-SGD on LoRA only (or, for the untrained default backbone, on its weights) -----------------
def test_stage2_trains_only_lora_parameters_within_the_budget():
    model = new_model(stage2_full=False)  # what a pretrained backbone gets by default
    model.learn_format()
    before = {n: p.detach().clone() for n, p in model.net.named_parameters()}
    ledger = PrivacyLedger(EPS, DELTA, 300)
    events = []
    model.fit(table_(300), EPS, DELTA, "rdp", ledger=ledger, on_event=events.append)
    trainable = {n for n, p in model.net.named_parameters() if p.requires_grad}
    assert trainable == model.lora_names and all("lora_" in n for n in trainable)
    changed = {n for n, p in model.net.named_parameters() if not torch.equal(p, before[n])}
    assert changed and changed <= model.lora_names
    # privacy: final ε within the target, a ledger entry, one event per step
    r, plan = model.train_result, model.plan
    assert r.steps_done == plan.steps and r.epsilon_spent <= EPS + 1e-9
    entry = ledger.entries[-1]
    assert entry.mechanism.startswith("DP-SGD") and entry.epsilon == r.epsilon_spent
    assert entry.details["trained_parameters"] == "LoRA only" and entry.details["noise_multiplier"] > 0
    assert len(events) == plan.steps and events[-1]["epsilon"] <= EPS + 1e-9


def test_stage2_trains_every_weight_of_the_untrained_default_but_the_position_embeddings():
    """The structure of stage 2 on the default backbone, fast (the learning itself: the slow test
    below)."""
    model = new_model(stage1_rows=64, stage1_epochs=1, epochs=1)
    assert not model.pretrained and model.stage2_full
    model.learn_format()
    before = {n: p.detach().clone() for n, p in model.net.named_parameters()}
    ledger = PrivacyLedger(EPS, DELTA, 200)
    model.fit(table_(200), EPS, DELTA, "rdp", ledger=ledger)
    trainable = {n for n, p in model.net.named_parameters() if p.requires_grad}
    assert trainable == model.stage2_names() and len(trainable) > len(model.lora_names)
    assert [n for n in before if n not in trainable] == [n for n in before if n.endswith("wpe.weight")]
    assert {n for n, p in model.net.named_parameters() if not torch.equal(p, before[n])} == trainable
    assert model.train_result.epsilon_spent <= EPS + 1e-9 and model.plan.sample_rate < 1
    assert ledger.entries[-1].details["trained_parameters"].startswith("every weight but the position embeddings")


# ~45 s: 469 DP-SGD steps, enough to learn a link between columns through the noise
@pytest.mark.slow
def test_untrained_default_backbone_learns_links_between_columns_in_stage2():
    """The default backbone knows nothing a LoRA could protect, and after stage 1 its LoRA learned
    no link between columns (this table's P(>50K | Male) − P(>50K | Female) = 0.5 came out as 0.03);
    stage 2 trains its weights instead, every one with a per-row clipped gradient, except the
    position embeddings, which have no per-row gradient and keep what stage 1 learned from the
    public schema."""
    # With the DP noise secret (not replayed from the seed), the gap learned varies from fit to fit;
    # this test asks for 0.1 of the table's 0.5. Measured over fits on one thread: ε = 8, 10 epochs:
    # 0.02-0.11 (3 of 5 below); ε = 30, 10 epochs: 0.03-0.53 (2 of 12 below); ε = 100, 10 epochs:
    # 0.11-0.47 (12); ε = 100, 15 epochs (469 steps of 64 rows): 0.33-0.54 (8 of 8, ~40 s each);
    # batches of 256 (80 steps) learned no link at all. Learning the link takes steps; less noise
    # only helps
    eps = 100.0
    model = new_model(stage1_rows=400, stage1_epochs=3, epochs=15)
    assert not model.pretrained and model.stage2_full
    model.learn_format()
    before = {n: p.detach().clone() for n, p in model.net.named_parameters()}
    table = table_(2000)
    ledger = PrivacyLedger(eps, DELTA, len(table))
    model.fit(table, eps, DELTA, "rdp", ledger=ledger)
    trainable = {n for n, p in model.net.named_parameters() if p.requires_grad}
    assert trainable == model.stage2_names() and len(trainable) > len(model.lora_names)
    assert [n for n in before if n not in trainable] == [n for n in before if n.endswith("wpe.weight")]
    changed = {n for n, p in model.net.named_parameters() if not torch.equal(p, before[n])}
    assert changed == trainable
    assert model.train_result.epsilon_spent <= eps + 1e-9 and model.plan.sample_rate < 1
    assert ledger.entries[-1].details["trained_parameters"].startswith("every weight but the position embeddings")
    synth = model.sample(1500, seed=0)
    rate = synth.groupby("sex")["income"].apply(lambda x: (x == ">50K").mean())
    assert rate["Male"] - rate["Female"] > 0.1, rate


def test_lora_gradients_only_and_numerical_loss_has_a_gradient():
    model = new_model(stage2_full=False)
    model._trainable(False)
    model.net.train()
    rows = model.encode(table_(16))
    ce, num = model.row_losses(model.net, rows)
    assert num.shape == (16,) and torch.all(num > 0)
    num.sum().backward()
    grads = {n: p.grad for n, p in model.net.named_parameters() if p.grad is not None}
    assert grads and set(grads) <= model.lora_names
    assert any(float(g.abs().sum()) > 0 for g in grads.values())
    # and with respect to the logits directly
    logits = torch.randn(2, 5, model.codec.vocab_size, requires_grad=True)
    tgt = torch.tensor([[model.codec.digit_ids[3], model.codec.digit_ids[9], 0, 0, 0]] * 2)
    kind = torch.tensor([[row_text.DIGIT, row_text.DIGIT, 0, 0, 0]] * 2)
    cols = torch.zeros(2, 5, dtype=torch.long)
    exps = torch.tensor([[row_text.EXP_OFFSET + 1, row_text.EXP_OFFSET, 0, 0, 0]] * 2)
    loss = model.numeric_loss(logits, tgt, kind, cols, exps).sum()
    loss.backward()
    assert float(logits.grad.abs().sum()) > 0


def test_token_weights_alpha_on_values_and_the_column_choice_only_in_stage1(monkeypatch):
    """Value and digit tokens weigh α, format tokens 1 − α. At a column name (ORDER) stage 1 learns
    which column comes next; stage 2 only that one does, −log Σ_names p(name): the order is random
    per row, so the choice says nothing about the table."""
    # over every output (the next test: masked)
    model = new_model(beta=0.0, alpha=0.7, constrained_loss=False)
    rows = model.encode(table_(6))
    ids, kinds = rows[:, 0], rows[:, 1]
    C = len(model.schema.names)
    order = kinds == row_text.ORDER
    assert (order.sum(1) == C).all() and set(ids[order].tolist()) <= set(model._order_starts.nonzero().squeeze(1).tolist())
    with torch.no_grad():
        logits = model.net(input_ids=ids[:, :-1].clamp(min=0)).logits
        ce = torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, 1:].clamp(min=0), reduction="none")
        starts = model._order_starts
        any_name = torch.logsumexp(logits, -1) - torch.logsumexp(logits[..., starts], -1)

    def expected(choice):
        k = kinds[:, 1:]
        w = torch.zeros_like(ce)
        w[(k == row_text.FORMAT) | (k == row_text.ORDER)] = 0.3
        w[(k == row_text.VALUE) | (k == row_text.DIGIT)] = 0.7
        w[k == row_text.ORDER_TAIL] = 0.3 if choice else 0.0
        loss = ce if choice else torch.where(k == row_text.ORDER, any_name, ce)
        return (loss * w).sum(1) / w.sum(1)

    with torch.no_grad():
        stage2 = model.loss_fn(model.net, rows)
        assert torch.allclose(stage2, expected(False), atol=1e-5)
        model.order_choice_now = True
        assert torch.allclose(model.loss_fn(model.net, rows), expected(True), atol=1e-5)
        # the choice's log(columns left) is gone
        assert (stage2 < model.loss_fn(model.net, rows)).all()
    model.order_choice_now = False
    seen = []
    monkeypatch.setattr(llm.model, "train", lambda *a, **k: seen.append(model.order_choice_now) or llm.model.TrainResult(
        steps_done=0, steps_planned=0, cancelled=False, epsilon_spent=0.0, seconds=0.0, samples_seen=0,
        last_loss=None, device="cpu"))
    model.learn_format()
    assert seen == [True] and model.order_choice_now is False


@pytest.mark.parametrize("options", [{}, {"row_format": "compact"}])
def test_stage2_loss_is_over_the_tokens_constrained_decoding_allows(options, monkeypatch):
    """With constrained_loss, stage 2's cross-entropy at each token is over what the row grammar
    allows there (the choice the model makes when it samples): a token with one choice costs
    nothing, so the noisy steps go into the values, not into a format constrained decoding imposes
    anyway. The mask at a token is the grammar's after the row's own tokens before it: the same
    whichever rows are encoded with it. Stage 1, which teaches the format itself, and
    constrained_loss=False keep the loss over every output. It is on by default for a pretrained
    backbone sampled with constraints (the next test), off for the default backbone."""
    model = new_model(beta=0.0, constrained_loss=True, **options)
    table = table_(40)
    rows = model.encode(table)
    where = rows[:, 4]
    # a mask at every token
    assert (where[:, 0] == 0).all() and (where[:, 1:][rows[:, 0, 1:] >= 0] > 0).all()
    book = model._loss_masks
    grammar = llm.grammar.Grammar(model.codec, "cpu", model.outputs)
    C = len(model.schema.names)
    # one row alone: its masks are the grammar's on its own tokens too
    alone = model.encode(table.iloc[[7]])
    for row in (rows[0], rows[7], alone[0]):
        ids = [t for t in row[0].tolist() if t >= 0]
        state = grammar._enter_name(tuple(range(C)), ())
        for t in range(1, len(ids)):
            mask = book.masks[int(row[4, t])]
            assert torch.equal(mask, grammar.allowed(state)) and mask[int(model.output_of[ids[t]])]
            state = grammar.step(state, ids[t])
    with torch.no_grad():
        masked, _ = model.row_losses(model.net, rows)
        full = rows.clone()
        full[:, 4] = 0
        unmasked, _ = model.row_losses(model.net, full)
    assert torch.isfinite(masked).all() and (masked < unmasked).all()
    forced = torch.tensor([[int(book.masks[int(k)].sum()) == 1 for k in row[1:]] for row in where])
    assert forced.any()  # e.g. the separator after a category: nothing to learn there
    assert (model.encode(table, masks=False)[:, 4] == 0).all()
    assert not new_model().constrained_loss and (new_model().encode(table)[:, 4] == 0).all()
    # a gradient with the masks is finite (the name and digit terms read positions where none is
    # allowed)
    model._trainable(False)
    ce, num = model.row_losses(model.net, rows[:8])
    (ce + num).sum().backward()
    grads = [p.grad for p in model.net.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)
    seen = []
    monkeypatch.setattr(llm.model, "train", lambda net, data, *a, **k: seen.append(data) or llm.model.TrainResult(
        steps_done=0, steps_planned=0, cancelled=False, epsilon_spent=0.0, seconds=0.0, samples_seen=0,
        last_loss=None, device="cpu"))
    model.learn_format()
    assert len(seen) == 1 and (seen[0][:, 4] == 0).all()  # stage 1: over every output


def test_default_embeddings_are_one_matrix_in_stage1_and_two_in_stage2(monkeypatch):
    model = new_model()
    seen = []

    def spy(*a, **k):
        seen.append(model._output_layer().weight is model.net.get_input_embeddings().weight)
        return llm.model.TrainResult(steps_done=0, steps_planned=0, cancelled=False, epsilon_spent=0.0, seconds=0.0,
                               samples_seen=0, last_loss=None, device="cpu")

    monkeypatch.setattr(llm.model, "train", spy)
    model.learn_format()
    out, emb = model._output_layer().weight, model.net.get_input_embeddings().weight
    assert seen == [True]                                   # stage 1: tied
    # then apart, starting from the same values
    assert out is not emb and torch.equal(out, emb)
    assert {n for n, _ in model.net.named_parameters() if "lm_head" in n and "lora" not in n}


def test_uniform_next_column_keeps_the_chance_a_value_ends_and_spreads_it_evenly():
    model = new_model()
    starts = model._order_starts
    V = starts.numel()
    first, second, third = starts.nonzero().squeeze(1)[:3].tolist()
    other = int((~starts).nonzero()[0])
    probs = torch.zeros(2, V)
    # the model prefers one column
    probs[0, [first, second, other]] = torch.tensor([0.5, 0.1, 0.4])
    probs[1, [first, third]] = torch.tensor([0.9, 0.1])
    mask = torch.zeros(2, V, dtype=torch.bool)
    mask[0, [first, second, other]] = True
    mask[1, [first, third]] = True
    out = model._uniform_next_column(probs, mask)
    assert torch.allclose(out[0, [first, second, other]], torch.tensor([0.3, 0.3, 0.4]))
    assert torch.allclose(out[1, [first, third]], torch.tensor([0.5, 0.5]))
    assert torch.allclose(out.sum(1), torch.ones(2)) and float(out[~mask].abs().sum()) == 0


# --- sampling ------------------------------------------------------------------------------------
def test_constrained_sampling_is_always_well_formed(fitted):
    model, _ = fitted
    table = model.sample(150, seed=0)
    info = model.last_sample_info
    assert len(table) == 150 and info["format_compliance"] == 1.0 and info["rejected_rows"] == 0
    assert "format_compliance_unconstrained" in info and info["constrained"]
    assert list(table.columns) == model.schema.names
    assert table["sex"].isin(["Female", "Male"]).all() and table["age"].between(18, 80).all()
    assert (table["age"] == table["age"].round()).all() and table["hours"].between(0, 100).all()
    assert table["job"].dropna().isin(["clerk", "nurse", "pilot"]).all()



def test_decoding_states_are_let_go_past_their_bound_between_batches(fitted, monkeypatch):
    """The numbered decoding states are kept between batches up to a bound (the sentence format
    reaches a few dozen new ones a row: a large sample would otherwise hold millions); past it a
    batch starts afresh, and the rows drawn are the same as with every state kept."""
    model, _ = fitted
    monkeypatch.setattr(model.config, "sample_batch_size", 16)
    model._automaton = None
    kept = model.sample(48, seed=3)
    monkeypatch.setattr(llm.sampling, "AUTOMATON_STATES", 10)
    built = []

    class Counted(llm.grammar.Automaton):
        def __init__(self, grammar):
            super().__init__(grammar)
            built.append(self)

    monkeypatch.setattr(llm.sampling, "Automaton", Counted)
    pd.testing.assert_frame_equal(kept, model.sample(48, seed=3))
    # three constrained batches of 16 rows, each past the bound: each starts afresh
    assert len(built) == 3

def test_value_specified_prompts_satisfy_the_conditions(fitted):
    model, _ = fitted
    table = model.sample(40, conditions={"sex": "Female", "income": ">50K"}, seed=1)
    assert (table["sex"] == "Female").all() and (table["income"] == ">50K").all()
    info = model.last_sample_info
    assert info["method"] == "value-specified prompt" and set(info["exact_columns"]) == {"sex", "income"}
    table = model.sample(20, conditions={"age": 33, "job": None}, seed=2)
    assert (table["age"] == 33).all() and table["job"].isna().all()
    every = {"age": 40, "sex": "Male", "job": "clerk", "hours": 12.5, "income": "<=50K"}
    assert (model.sample(3, conditions=every, seed=0)["hours"] == 12.5).all()
    with pytest.raises(ValueError):
        model.sample(3, conditions={"sex": "Robot"})
    with pytest.raises(ValueError):
        model.sample(3, conditions={"age": 200})


def test_same_seed_same_rows_and_save_load(fitted, tmp_path):
    model, _ = fitted
    a = model.sample(30, seed=5)
    pd.testing.assert_frame_equal(a, model.sample(30, seed=5))
    model.save(tmp_path / "m")
    loaded = get_model_class("dp-llmtgen").load(tmp_path / "m")
    pd.testing.assert_frame_equal(a, loaded.sample(30, seed=5))
    assert json.loads((tmp_path / "m" / "model.json").read_text())["family"] == "dp-llmtgen"


def test_fairness_prompts_lower_the_demographic_parity_gap(fitted):
    model, _ = fitted
    out = fair_sample(model, 300, "sex", "income", ">50K", share=0.8, seed=0, pilot_rows=300)
    assert out.conditioned_rows and sum(out.conditioned_rows.values()) == 240
    assert out.gap_after < out.gap_before or out.gap_before < 0.05
    assert out.gap_after <= 0.2 * out.gap_before + 0.08


# --- backbones, the API ----------------------------------------------------------------------------
def test_a_pretrained_backbone_on_the_gpu_preset_trains_its_last_blocks_in_batches_of_256_rows():
    """The pretrained recipe on the gpu preset (measured on full Adult on an H200, ahead of the
    default): LoRA r = 8 on the last 4 blocks, 2 epochs of Poisson batches of 256 at 2e-2, in
    physical chunks of 256 (SmolLM2 at 1,024-row chunks ran out of an H100's memory), no stage 1;
    options given still win."""
    cls = get_model_class("dp-llmtgen")
    model_cfg, train_cfg = cls.configure("gpu", {"backbone": "/models/any"})
    assert train_cfg.physical_batch_size == 256 and train_cfg.batch_size == 256 and train_cfg.epochs == 2
    assert train_cfg.lr == 2e-2 and model_cfg.lora_r == 8 and model_cfg.lora_alpha == 16
    assert model_cfg.stage1_rows == 0 and model_cfg.lora_targets == "all-linear" and model_cfg.lora_last_layers == 4
    _, default_train = cls.configure("gpu", {})
    # the default backbone: one chunk
    assert default_train.physical_batch_size > default_train.batch_size
    _, asked = cls.configure("gpu", {"backbone": "/models/any", "physical_batch_size": 64})
    assert asked.physical_batch_size == 64  # an option given wins over the recipe


def tiny_backbone(directory, schema, n_layer: int = 1) -> str:
    """A small GPT-2 (n_layer blocks) saved like a downloaded pretrained model (config, weights,
    tokenizer)."""
    from transformers import GPT2Config, GPT2LMHeadModel
    tok = row_text.build_schema_tokenizer(schema)
    GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_positions=128, n_embd=32, n_layer=n_layer, n_head=2,
                               bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)).save_pretrained(directory)
    tok.save_pretrained(directory)
    return str(directory)


def test_a_pretrained_backbone_on_the_cpu_preset_takes_four_times_the_dp_steps(tmp_path):
    """SmolLM2 moves with the updates: on a 2,000-row table the preset's batches (n/8 = 250 rows)
    gave it 16 steps at ε = 1; its CPU recipe takes Poisson batches of 64, so ~60 steps for the same
    rows seen and ε."""
    cls = get_model_class("dp-llmtgen")
    pretrained = cls(schema_(), preset="cpu", seed=0, backbone=tiny_backbone(tmp_path / "lm", schema_(), n_layer=2))
    default = cls(schema_(), preset="cpu", seed=0)
    mine, theirs = (m.plan_privacy(2000, 1.0, DELTA) for m in (pretrained, default))
    assert pretrained.train_config.lr == 1e-2 and mine.expected_batch_size == 64 and theirs.expected_batch_size == 250
    # LoRA on every linear layer of the last 2 blocks: GPT-2's are Conv1D (none were found, and peft
    # refused)
    assert {n.split(".h.")[1].split(".")[0] for n in pretrained.lora_names} == {"0", "1"}
    # the same budget, more (noisier) steps
    assert mine.steps >= 3.5 * theirs.steps and mine.planned_epsilon <= 1.0
    # each step samples fewer rows: less σ per step
    assert mine.noise_multiplier < theirs.noise_multiplier * 0.7
    quick = cls(schema_(), preset="quick", seed=0, backbone=tiny_backbone(tmp_path / "lm", schema_(), n_layer=2))
    assert (quick.train_config.batch_size, quick.train_config.lr, quick.train_config.epochs) == (64, 1e-2, 1)


def test_local_backbone_directory_loads_offline_and_saves_the_adapter_only(tmp_path):
    schema = schema_()
    tok = row_text.build_schema_tokenizer(schema)
    model = get_model_class("dp-llmtgen")(schema, preset="tiny", seed=0, backbone=tiny_backbone(tmp_path / "lm", schema),
                                          stage1_rows=64, stage1_epochs=1)
    assert model.pretrained and model.n_trainable < model.n_parameters
    # a pretrained backbone writes compact rows and predicts only the tokens a row can hold
    assert model.row_format == "compact" and model.config.lora_last_layers == 1  # the CPU recipe's
    assert model.net.get_output_embeddings().out_features == len(model.codec.output_tokens()) < len(tok)
    rows = model.encode(table_(4))
    # sampled with constraints, its stage 2 loss is over what the row grammar allows at each token
    assert model.constrained_loss and (rows[:, 4, 1:][rows[:, 0, 1:] >= 0] > 0).all()
    with torch.no_grad():  # the header read once (its keys and values) = the header in every row
        cached = model.net(input_ids=rows[:, 0].clamp(min=0), **{model.cache_keyword: model.prefix_cache(4)}).logits
        whole = torch.cat([model._prefix.expand(4, -1), rows[:, 0].clamp(min=0)], 1)
        inline = model.net(input_ids=whole).logits[:, model._prefix.shape[1]:]
        alone = model.net(input_ids=rows[:, 0].clamp(min=0)).logits
    assert torch.allclose(cached, inline, atol=1e-5) and not torch.allclose(cached, alone, atol=1e-3)
    model.fit(table_(200), EPS, DELTA, "rdp")
    # the grammar states the private rows reached are let go after training
    assert model._loss_masks is None
    model.save(tmp_path / "run")
    saved = torch.load(tmp_path / "run" / "model.pt", weights_only=True)
    assert saved and all("lora_" in k or k in model.head_names for k in saved) and model.head_names <= set(saved)
    # the small output layer trains too
    assert model.head_names and model.head_names <= model.stage2_names()
    loaded = get_model_class("dp-llmtgen").load(tmp_path / "run")
    pd.testing.assert_frame_equal(model.sample(10, seed=3), loaded.sample(10, seed=3))
    # conditions: a leading column in the prompt, a later one by rejection
    lead = loaded.sample(6, conditions={"age": 30, "sex": "Female"}, seed=1, calibrate=False)
    assert (lead["age"] == 30).all() and (lead["sex"] == "Female").all()
    assert loaded.last_sample_info["method"] == "value-specified prompt"
    later = loaded.sample(6, conditions={"age": 30, "job": "nurse"}, seed=1, calibrate=False, max_tries_factor=200)
    info = loaded.last_sample_info
    assert (later["age"] == 30).all() and (later["job"] == "nurse").all()
    assert info["method"] == "rejection" and info["exact_columns"] == ["age"] and info["rejection_columns"] == ["job"]
    # fairness control through those conditions, as with the sentence format
    out = fair_sample(loaded, 300, "sex", "income", ">50K", share=0.8, seed=0, pilot_rows=300)
    assert sum(out.conditioned_rows.values()) == 240 and len(out.table) == 300
    assert out.gap_after < out.gap_before or out.gap_before < 0.05
    # a save from before the compact format reloads as it was trained: sentences, every output
    old = json.loads((tmp_path / "run" / "model.json").read_text())
    for key in ("row_format", "output_tokens"):
        del old["config"][key]
    upgraded = get_model_class("dp-llmtgen").upgrade_state(old)["config"]
    assert upgraded["row_format"] == "sentence" and upgraded["output_tokens"] == "all"
    listed = llm.list_local_causal_lms(tmp_path / "nowhere")
    assert listed == []
    cache = tmp_path / "hub" / "models--someone--tiny-lm" / "snapshots" / "abc"
    cache.mkdir(parents=True)
    (cache / "config.json").write_text(json.dumps({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"}))
    assert llm.list_local_causal_lms(tmp_path / "hub")[0]["id"] == "someone/tiny-lm"


def test_api_fit_and_sample_through_a_run_directory(tmp_path):
    result = api.fit(table_(300), schema_(), model="dp-llmtgen", epsilon=EPS, delta=DELTA, preset="tiny",
                     accountant="rdp", seed=0, run_dir=tmp_path / "run",
                     options={"stage1_rows": 64, "stage1_epochs": 1})
    assert result.ledger.spent_epsilon <= EPS + 1e-9
    table, info = api.sample(tmp_path / "run", 12, conditions={"sex": "Male"}, seed=0)
    assert len(table) == 12 and (table["sex"] == "Male").all() and info["format_compliance"] == 1.0


def test_time_estimate_times_a_few_stage1_steps_instead_of_running_it():
    from synth_core.runs.timing import estimate_fit_seconds
    est = estimate_fit_seconds("dp-llmtgen", schema_(), "tiny", 2000, 1.0, 1e-5, probe_steps=2,
                               options={"stage1_rows": 64000})  # 4,000 stage-1 steps if run in full
    assert est["seconds"] > est["per_step_s"] * est["steps"]  # stage 1's estimate is included
    model = new_model(stage1_rows=64000)
    seconds = model.time_fixed_costs(probe_steps=2)
    # 64,000 rows, batch 32, 2 epochs
    assert model.stage1_result.steps_done == 2 and model.stage1_result.steps_planned == 4000
    assert seconds > 0 and model.format_learned


@pytest.mark.parametrize("row_format, capacity", [("sentence", 64), ("compact", 64), ("compact", 3)])
def test_decoding_cache_gives_the_logits_of_transformers_cache(row_format, capacity):
    """Sampling's KV cache (buffers allocated once, written in place; grown when a row outruns them)
    gives the same next-token logits as transformers' DynamicCache, the compact format's header
    included."""
    model = new_model(row_format=row_format)
    net = model.net.eval()
    kw = model.cache_keyword
    prompts = torch.tensor([model.codec.prompt_ids({}, 0)] * 3)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        ref = net(input_ids=prompts, **{kw: model.prefix_cache(3)}, use_cache=True)
        ours = net(input_ids=prompts, **{kw: model.prefix_cache(3, capacity=capacity)}, use_cache=True)
        for _ in range(6):
            assert torch.allclose(ref.logits[:, -1], ours.logits[:, -1], atol=1e-5)
            nxt = torch.randint(0, model.codec.vocab_size, (3, 1), generator=gen)
            ref = net(input_ids=nxt, **{kw: llm.backbone.returned_cache(ref)}, use_cache=True)
            ours = net(input_ids=nxt, **{kw: llm.backbone.returned_cache(ours)}, use_cache=True)
        assert torch.allclose(ref.logits[:, -1], ours.logits[:, -1], atol=1e-5)
