import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import reports
from baselines import load_claims, load_published
from reports.claims import check_claims
from reports.load import ReportError, load_records
from reports.rows import compute_rows, metric_by_dataset

from leaderboard_inputs import catalogued, rehashed

GOLDEN = Path(__file__).parent / "golden"
ROOT = Path(__file__).parent.parent


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    folder = tmp_path_factory.mktemp("golden")
    index = reports.build(catalogued(GOLDEN / "records", folder / "records"), folder / "site")
    out = folder / "site"
    assert index == out / "index.html"
    return out


def _read_rows(path):
    return pd.read_csv(path, dtype={"variant": str, "suite": str, "paper_variant": str,
                                    "cell": str})


def test_rows_equal_the_golden_file(site):
    built, expected = _read_rows(site / "rows.csv"), _read_rows(GOLDEN / "expected_rows.csv")
    pd.testing.assert_frame_equal(built, expected, check_exact=False, rtol=1e-9)


def test_golden_rows_hold_the_hand_computed_numbers(site):
    rows = _read_rows(site / "rows.csv").fillna({"variant": "", "suite": "", "paper_variant": ""})
    mine = rows[(rows.dataset == "mnist") & (rows.method == "lp-1st") & (rows.suite == "quick")]
    two_seeds = mine[mine.epsilon == 1].iloc[0]
    assert (two_seeds.n, two_seeds["mean"]) == (2, 95.0)
    assert two_seeds["std"] == pytest.approx(math.sqrt(0.08))  # sample std of 94.8, 95.2
    assert (two_seeds.paper_value, two_seeds["diff"]) == (95.34, pytest.approx(-0.34))
    assert bool(two_seeds.column_inferred) and not two_seeds.beyond_tolerance
    one_failed = mine[mine.epsilon == 2].iloc[0]
    assert (one_failed.n, one_failed.failed, one_failed["mean"]) == (1, 1, 97.5)
    # the failed record carries no notion; it has the notion of the method's ok runs
    assert one_failed.protects == "labels"
    inception = rows[(rows.method == "lp-1st") & (rows.variant == "inception")].iloc[0]
    assert (inception.paper_value, inception.paper_variant) == (95.34, "")  # headline
    spread = rows[(rows.method == "spread-lr") & (rows.suite == "quick")].iloc[0]
    assert spread.paper_value == 94.4 and spread.paper_variant == spread.variant
    dp_sgd = rows[(rows.dataset == "mnist") & (rows.method == "dp-sgd") & (rows.suite == "quick")]
    assert sorted(dp_sgd.paper) == ["Abadi et al. 2016", "Ghazi et al. 2021"]
    assert dp_sgd.beyond_tolerance.all() and (dp_sgd.delta == 1e-5).all()
    assert (dp_sgd.neighbours == "add/remove").all()
    non_private = rows[(rows.method == "non-private") & (rows.suite == "quick")].iloc[0]
    assert math.isinf(non_private.epsilon) and non_private.paper_value == 99.33
    paper_only = rows[(rows.dataset == "kmnist") & (rows.method == "lp-2st")
                      & (rows.paper == "Ghazi et al. 2021")]
    assert len(paper_only) == 4 and (paper_only.n == 0).all()
    assert paper_only.suite.eq("").all()


def test_index_shows_notions_failures_and_citations(site):
    html = "".join((site / page).read_text()
                   for page in ("index.html", "tables.html", "how-to-read.html"))
    for piece in ("1 failed", "quick suite", "inferred column", "paper only",
                  "not an overall model epsilon", "Label-DP", "Full DP", "±1.0",
                  "95.00 ± 0.28", "Ghazi et al. 2021, Table 4, e=1", 'class="diff-bad"',
                  "pre-trained on CIFAR-100", "rows.csv", "rows.md",
                  "the non-private optimum of the same model"):
        assert piece in html, piece
    assert re.search(r"verdict-TRUE\">TRUE</span>\s*Objective perturbation", html)
    assert "not enough runs" in html
    # the legend, and the inception cell compared with the paper's headline number
    assert html.count("<span class=\"headline\">vs the paper's headline setting") == 2


def _links(page):
    return [link for link in re.findall(r'(?:href|src)="([^"#]+)', page.read_text())
            if not link.startswith("data:")]


def test_every_link_resolves_and_cells_reach_the_raw_records(site):
    cells = sorted((site / "cells").glob("*.html"))
    assert len(cells) == 9  # one provenance page per configuration of ours
    for page in site.rglob("*.html"):
        for link in _links(page):
            assert (page.parent / link).is_file(), f"{page.name} -> {link}"
    raw = {Path(link).name for page in cells for link in _links(page) if link.endswith(".json")}
    assert raw == {path.name for path in (GOLDEN / "records").glob("*.json")}
    assert len(list((site / "plots").glob("*.png"))) == len(set(load_published().dataset))


def test_a_page_per_method_and_per_dataset_on_the_board_or_registered(site):
    from benchmarks.datasets import SPECS
    from benchmarks.registry import all_methods

    published = load_published()
    methods = {page.stem for page in (site / "methods").glob("*.html")}
    assert methods == set(all_methods()) | set(published.method) | {"spread-lr"}
    datasets = {page.stem for page in (site / "datasets").glob("*.html")}
    assert datasets == set(SPECS) | set(published.dataset)


def test_the_site_needs_nothing_from_outside_its_folder(site):
    for page in site.rglob("*.html"):
        html = page.read_text()
        assert "://" not in " ".join(_links(page)), page
        assert re.findall(r"<script[^>]*>", html) == [
            f'<script defer src="{"" if page.parent == site else "../"}assets/leaderboard.js">']
    assert {path.name for path in (site / "assets").iterdir()} == {"leaderboard.js", "site.css"}


def test_cell_page_lists_provenance(site):
    html = "".join(page.read_text() for page in (site / "cells").glob("*.html"))
    for piece in ("0123456789abcdef0123456789abcdef01234567", "dirty", "sha256:mnist-golden",
                  "61.5 s", "out of memory", "batch_size", "1.26.4", "epsilon=2, delta=0",
                  "Where the budget went", "RRWithPrior", "stage 1 of 1"):
        assert piece in html, piece


def test_no_private_diagnostic_reaches_the_site(site):
    """The golden DP-ERM record carries private diagnostics (noise norm, held-out
    mistakes, solver gradient) and the failed record a traceback: none may appear in
    any file of the site, raw JSON copies included."""
    for path in site.rglob("*"):
        if path.is_file() and path.suffix != ".png":
            text = path.read_text()
            for secret in ("31415.9265", "271828", "161803", "6.02214e-23", "diagnostics",
                           "Traceback"):
                assert secret not in text, (path, secret)


def test_notion_explanations_match_the_neighbour_relation(site):
    lines = (site / "index.html").read_text().split("<tr ")

    def line_of(method: str) -> str:
        return next(text for text in lines if f"<strong>{method}</strong>" in text)

    dp_erm = line_of("dp-erm-objective")
    assert "one record replaced (the dataset size n stays fixed)" in dp_erm
    assert "adding or removing" not in dp_erm
    assert "adding or removing one record" in line_of("dp-sgd")
    assert "one example&#39;s label replaced" in line_of("lp-1st")


def test_index_lines_carry_their_notion_for_the_filter_and_sort_keys(site):
    html = (site / "tables.html").read_text()
    mnist = "".join(html.split(f'id="{table}"')[1].split("</table>")[0]
                    for table in ("table-mnist", "table-mnist-paper"))
    assert mnist.count("<tr data-scope=") == len(
        _read_rows(site / "rows.csv").query("dataset == 'mnist'"))
    for scope in ("label-dp", "full-dp", "non-private"):
        assert f'<tr data-scope="{scope}"' in mnist
    assert 'data-sort="Infinity"' in mnist and 'data-sort="95.0"' in mnist
    assert 'id="notion-filter" hidden' in html  # shown by the script, which applies it


def test_method_page_gives_paper_notion_defaults_configurations_and_budget(site):
    html = (site / "methods" / "lp-1st.html").read_text()
    for piece in ("Deep Learning with Label Differential Privacy", "<dt>version</dt><dd>1",
                  "neighbouring datasets differ in one example&#39;s label replaced",
                  "pure epsilon-DP (delta = 0)", "parallel composition over disjoint examples",
                  "<code>peak_lr</code>", "epochs=2", "07a6406b1dab21b7cd93",
                  "e778e3ce186f22c334a1",
                  "95.00 ± 0.28", "Where the budget goes", "RRWithPrior",
                  "<td>0, 1</td>",  # one ledger entry, the same in seeds 0 and 1
                  "Published numbers", "Ghazi et al. 2021, Table 4, e=1"):
        assert piece in html, piece
    paper_only = (site / "methods" / "tempered-sigmoid.html").read_text()
    assert "Not implemented in privboard" in paper_only and "Ghazi et al. 2021" in paper_only


def test_dataset_page_gives_source_licence_fingerprint_and_test_split(site):
    from benchmarks.datasets import get_spec

    html = (site / "datasets" / "mnist.html").read_text()
    spec = get_spec("mnist")
    for piece in ("LeCun, Bottou, Bengio, Haffner", "not stated by the authors",
                  spec.fingerprint, "not the current fingerprint",  # the golden records' own
                  "0 public inputs, 10000 evaluated", "not recorded", "07a6406b1dab21b7cd93"):
        assert piece in html, piece
    assert "MIT" in (site / "datasets" / "fashion-mnist.html").read_text()
    assert "Not registered in privboard" in (site / "datasets" / "diabetes.html").read_text()


def test_split_sizes_come_from_the_verified_cache(tmp_path):
    from benchmarks.catalogue import cached_sizes
    from benchmarks.datasets import get_spec, load

    spec = get_spec("digits")
    assert cached_sizes(spec, tmp_path) is None
    data = load("digits", tmp_path)
    assert cached_sizes(spec, tmp_path) == {"train": len(data.train), "test": len(data.test)}


@pytest.mark.integration  # two sites: 15 s
def test_superseded_configurations_are_hidden_counted_and_shown_on_request(tmp_path):
    records = catalogued(GOLDEN / "records", tmp_path / "records")
    current = {json.loads(path.read_text())["config_id"]
               for path in (GOLDEN / "records").glob("*.json")} - {"07a6406b1dab21b7cd93"}
    hidden = reports.build(records, tmp_path / "hidden", current_configs=current)
    html = hidden.read_text()
    assert "3 records of 1 configuration" in html and "--show-superseded" in html  # audit too
    rows = _read_rows(tmp_path / "hidden" / "rows.csv")
    assert "07a6406b1dab21b7cd93" not in set(rows.cell.dropna())
    assert not (tmp_path / "hidden" / "cells" / "07a6406b1dab21b7cd93.html").exists()
    shown = reports.build(records, tmp_path / "shown", current_configs=current,
                          show_superseded=True)
    rows = _read_rows(tmp_path / "shown" / "rows.csv")
    assert rows[rows.cell == "07a6406b1dab21b7cd93"].superseded.all()
    assert '<span class="tag">superseded</span>' in (tmp_path / "shown" / "tables.html").read_text()


def _results_with(tmp_path, **changes):
    results = tmp_path / "results"
    shutil.copytree(GOLDEN / "records", results)
    record = json.loads((results / "mnist-lp1st-e1-s0.json").read_text())
    (results / "extra.json").write_text(json.dumps(rehashed({**record, **changes})))
    return catalogued(None, results)


def test_claim_turns_false_when_the_better_method_loses(tmp_path):
    results = _results_with(tmp_path, method="lp-2st", metrics={"accuracy_pct": 90.0})
    published = load_published()
    checked = {claim["claim_id"]: claim for claim in check_claims(
        load_claims(), load_records(results, metric_by_dataset(published)))}
    assert checked["lp-2st-beats-lp-1st-mnist"]["verdict"] == "FALSE"
    [comparison] = checked["lp-2st-beats-lp-1st-mnist"]["comparisons"]
    assert (comparison["mean_better"], comparison["mean_worse"]) == (90.0, 95.0)
    assert checked["objective-beats-output-adult"]["verdict"] == "TRUE"
    assert checked["pate-plus-beats-pate-fashion-mnist"]["verdict"] == "not enough runs"


def test_tolerance_decides_the_marks():
    published = load_published()
    records = load_records(GOLDEN / "records", metric_by_dataset(published))
    loose = compute_rows(records, published, tolerance=2.5)
    assert not loose.beyond_tolerance.any()
    strict = compute_rows(records, published, tolerance=0.3)
    assert set(strict[strict.beyond_tolerance].method) == {"dp-sgd", "lp-1st", "spread-lr"}


def test_missing_results_dir_is_one_line_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "site"
    assert reports.main(["--results", str(tmp_path / "nope"), "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "does not exist" in error
    assert list(tmp_path.iterdir()) == []


def test_out_replaces_only_a_site_that_report_wrote(tmp_path, site, capsys):
    """--out is replaced whole: a folder that is not such a site is refused in one line,
    before anything is read, and left as it was."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    for out, why in ((mine, "is a folder that privboard report did not write"),
                     (mine / "notes.txt", "is a file")):
        assert reports.main(["--results", str(GOLDEN / "records"), "--out", str(out)]) == 2
        error = capsys.readouterr().err
        assert error.count("\n") == 1 and f"--out {out} {why}" in error, error
    assert [path.name for path in mine.iterdir()] == ["notes.txt"]
    assert (mine / "notes.txt").read_text() == "keep me"
    empty = tmp_path / "empty"
    empty.mkdir()
    for out in (site, empty, tmp_path / "new"):
        reports.check_site_folder(out)  # a site it wrote, an empty folder, a new one


GOOD_PRIVACY = ('"privacy": {"protects": "nothing", "neighbours": "none", "kind": "none", '
                '"accountant": "none", "epsilon": "inf", "delta": 0}')


@pytest.mark.parametrize("text, message", [
    ("{not json", "is not a JSON object"),
    ("[1, 2]", "is not a JSON object"),
    ('{"schema": 2, "cell_id": "x", "config_id": "y", "suite": "quick", "status": "ok", '
     '"method": "m", "dataset": "mnist", "seed": 0, "variant": "", "epsilon": "inf", '
     '"delta": 0, ' + GOOD_PRIVACY + ', "metrics": {}}', "needs one of the metrics"),
    ('{"schema": 2, "cell_id": "x", "config_id": "y", "suite": "quick", "status": "ok", '
     '"method": "m", "dataset": "mnist", "seed": 0, "epsilon": 1, "delta": 0, '
     '"privacy": {"protects": "labels", "neighbours": "sideways", "kind": "pure", '
     '"accountant": "none", "epsilon": 1}, "metrics": {"accuracy_pct": 1}}',
     "privacy.neighbours is 'sideways'"),
    ('{"schema": 1, "status": "ok"}', "schema 1, expected 2"),
    ('{"schema": 2, "status": "ok"}', "missing cell_id"),
])
def test_bad_record_keeps_the_previous_site(tmp_path, text, message, site):
    out = tmp_path / "site"
    shutil.copytree(site, out)
    before = sorted(path.relative_to(out) for path in out.rglob("*"))
    results = tmp_path / "results"
    shutil.copytree(GOLDEN / "records", results)
    (results / "zz-bad.json").write_text(text)
    with pytest.raises(ReportError, match=message):
        reports.build(results, out)
    assert sorted(path.relative_to(out) for path in out.rglob("*")) == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["results", "site"]


def test_help(capsys):
    with pytest.raises(SystemExit) as exit_:
        reports.main(["--help"])
    assert exit_.value.code == 0
    help_text = capsys.readouterr().out
    for option in ("--results DIR", "--out DIR", "--tolerance"):
        assert option in help_text


@pytest.mark.integration
def test_fresh_build_escapes_record_text_and_never_imports_tensorflow(tmp_path):
    results = _results_with(tmp_path, variant="<script>alert(1)</script>")
    # Neither TensorFlow, nor the method code or registry, nor the data folder: a site
    # needs the records, their catalogue and baselines/ alone.
    code = ("import sys, reports; from pathlib import Path; "
            f"reports.build(Path({str(results)!r}), Path({str(tmp_path / 'site')!r})); "
            "print(sorted({m for m in sys.modules if m.split('.')[0] in ('tensorflow', "
            "'methods')} | {m for m in sys.modules if m == 'benchmarks.registry'}))")
    empty = tmp_path / "no-data"
    empty.mkdir()
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, check=True,
                          env={**os.environ, "PRIVBOARD_DATA": str(empty)})
    assert done.stdout.strip() == "[]"
    assert list(empty.iterdir()) == []
    html = (tmp_path / "site" / "index.html").read_text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script>" not in html


def test_no_records_yet_lists_every_paper_cell_as_paper_only(tmp_path):
    published = load_published()
    records = load_records(tmp_path, metric_by_dataset(published))
    rows = compute_rows(records, published, tolerance=1.0)
    assert len(rows) == len(published) and (rows.n == 0).all() and (rows.suite == "").all()
    assert {claim["verdict"] for claim in check_claims(load_claims(), records)} == {
        "not enough runs"}


def test_a_failure_while_writing_leaves_the_previous_site(tmp_path, site, monkeypatch):
    out = tmp_path / "site"
    shutil.copytree(site, out)
    before = (out / "index.html").read_text()

    def broken(staging, *args):
        (staging / "index.html").write_text("half")
        raise OSError("disk full")

    monkeypatch.setattr("reports.render.write_site", broken)
    with pytest.raises(OSError, match="disk full"):
        reports.build(GOLDEN / "records", out)
    assert (out / "index.html").read_text() == before
    assert [path.name for path in tmp_path.iterdir()] == ["site"]


def test_markdown_export_carries_the_same_rows(site):
    text = (site / "rows.md").read_text()
    assert text.count("\n") == 2 + len(_read_rows(site / "rows.csv"))
    assert "| 95.00 ± 0.28 (n=2) |" in text
    assert "-2.00 (beyond tolerance)" in text
    assert "(inferred column; paper's headline setting)" in text


SPECIAL = "a_b %&#$ {x} ~^ \\ <|>"


@pytest.fixture(scope="module")
def special_site(tmp_path_factory):
    """A site whose rows hold every character LaTeX treats as markup."""
    tmp_path = tmp_path_factory.mktemp("special")
    reports.build(_results_with(tmp_path, variant=SPECIAL), tmp_path / "site")
    return tmp_path / "site"


def test_latex_export_carries_the_same_rows_with_every_special_character_escaped(
        site, special_site):
    text = (site / "rows.tex").read_text()
    body = text.split("\\endfoot\n")[1].split("\\end{longtable}")[0]
    assert body.count("\n") == len(_read_rows(site / "rows.csv"))
    assert " & 95.00 \\ensuremath{\\pm} 0.28 (n=2) & " in body
    assert "\\toprule" in text and "\\midrule" in text and "\\bottomrule" in text
    escaped = ("a\\_b \\%\\&\\#\\$ \\{x\\} \\textasciitilde{}\\textasciicircum{} "
               "\\textbackslash{} \\textless{}\\textbar{}\\textgreater{}")
    assert f" & {escaped} & " in (special_site / "rows.tex").read_text()


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="no pdflatex (TeX Live) here")
def test_latex_export_compiles(special_site, tmp_path):
    shutil.copy(special_site / "rows.tex", tmp_path)
    (tmp_path / "document.tex").write_text(
        "\\documentclass{article}\n\\usepackage[T1]{fontenc}\n"
        "\\usepackage{booktabs,longtable}\n\\begin{document}\n\\tiny\n\\input{rows.tex}\n"
        "\\end{document}\n")
    subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "document.tex"],
                   cwd=tmp_path, capture_output=True, check=True, timeout=120)
    assert (tmp_path / "document.pdf").stat().st_size > 0


def test_audited_epsilons_stand_beside_the_claims_and_never_count_as_accuracy(site):
    rows = _read_rows(site / "rows.csv")
    lp = rows[(rows.cell == "07a6406b1dab21b7cd93") & rows.paper.notna()].iloc[0]
    assert (lp.n, lp["mean"]) == (2, 95.0)  # the audited twin is not a third seed
    # Each bound is judged again from its counts at its share of the verdict's 5%
    # (benchmarks.audit.levels): 97.5% for a label release's two bounds.
    assert (lp.audited_epsilon, lp.audit_ceiling, bool(lp.audit_flagged)) == (
        0.0, pytest.approx(5.3394, abs=1e-4), False)
    refuted = rows[rows.cell == "428de137506538aa93fa"].iloc[0]
    assert bool(refuted.audit_flagged) and refuted.audited_epsilon > refuted.epsilon
    html = (site / "tables.html").read_text() + (site / "how-to-read.html").read_text()
    assert "≥ 0.00" in html and "ceiling 5.3" in html and "claim refuted" in html
    assert "can refute a small claim but never confirm a large one" in html
    cell = (site / "cells" / "07a6406b1dab21b7cd93.html").read_text()
    assert "audited twin" in cell and "140 of 250 guesses right" in cell
    # Both audits, each with what it observed: the release, then the model.
    assert lp.release_epsilon == pytest.approx(0.8886, abs=1e-4) and "at release ≥ 0.89" in html
    assert ("At the release (RRWithPrior: the label each canary was released with): 440 "
            "of 590 guesses right on 1000 canaries") in cell
    assert "From the model (its predictions on the canaries)" in cell
    checked = (site / "cells" / "428de137506538aa93fa.html").read_text()
    assert ("Noise check of output perturbation (beta = 12: the radius of the noise is "
            "Gamma(d, 1/beta)): mean radius 8.9 on 200 draws, p = 0.41 at level 1%") in checked
    assert "noise as charged" in html


def test_released_labels_get_their_noise_plot(tmp_path):
    """PATE++'s Figure 4 from the records: a dataset whose runs released labels for public
    inputs gets the noisy-label rate and the student's accuracy against epsilon."""
    results = _results_with(tmp_path, method="pate-confident-gnmax",
                            metrics={"accuracy_pct": 90.0, "released_label_accuracy_pct": 80.0,
                                     "released_labels": 300})
    index = reports.build(results, tmp_path / "site")
    assert (tmp_path / "site" / "plots" / "mnist-label-noise.png").is_file()
    assert "plots/mnist-label-noise.png" in index.with_name("tables.html").read_text()
    assert not (tmp_path / "site" / "plots" / "adult-label-noise.png").exists()


def test_no_published_file_names_a_path_of_the_build_machine(site):
    """The index says where its records came from in counts, never by a folder."""
    for path in site.rglob("*"):
        if path.is_file() and path.suffix != ".png":
            text = path.read_text()
            for folder in (site.parent, ROOT, Path.home()):
                assert str(folder) not in text, (path.relative_to(site), folder)
    index = (site / "index.html").read_text()
    assert re.search(r"Built from the archive \(\d+ records\)|Built from \d+ local records",
                     index)


def test_a_plots_legend_names_each_audit_for_what_it_is():
    """A tested claim's empirical epsilon is not an estimate of epsilon ("emp. ε", none
    where the run rejects no curve, never 0.00); the others are lower bounds (≥)."""
    from reports.plots import _audited

    line = pd.DataFrame({"epsilon": [1.0, 2.0, 4.0], "audited_epsilon": [0.3, 0.5, 0.2],
                         "release_epsilon": [0.4, math.nan, 0.6],
                         "claim_rejected": [False, None, False],
                         "empirical_epsilon": [0.71, math.nan, math.nan]})
    assert " ".join(_audited(line).split()) == (
        "; audits: emp. ε 0.71 at 1, ε≥0.50 at 2, no emp. ε at 4")
