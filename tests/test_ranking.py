"""The first screen's ranking: per dataset (the most used first, Adult last) and privacy
family, our configurations at each epsilon, best first, the best of each track of
settings on top; any new row takes its place."""
import math

import pandas as pd
import pytest

import privboard
from benchmarks.records import SHUFFLED_BATCHES
from reports.presentation import slug
from reports.ranking import rankings
from tests.leaderboard_inputs import catalogued
from tests.test_report import GOLDEN


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    records = catalogued(GOLDEN / "records", tmp_path_factory.mktemp("ranking") / "records")
    return privboard.load_rows(results=records, archive=None)


def _best(ranking):
    return [line for line in ranking["lines"] if line["best"]]


def test_each_epsilon_ranks_best_first_and_marks_one_best(rows):
    datasets = rankings(rows)
    names = [dataset["name"] for dataset in datasets]
    assert names[0] == "mnist" and names[-1] == "adult"
    mnist = datasets[0]
    assert [family["key"] for family in mnist["families"]] == ["label-dp", "full-dp"]
    label_dp = mnist["families"][0]["rankings"]
    assert [ranking["epsilon"] for ranking in label_dp] == [1.0, 2.0]
    for ranking in label_dp:
        means = [line["mean"] for line in ranking["lines"]]
        assert means == sorted(means, reverse=True)
        assert [line["rank"] for line in ranking["lines"]] == list(range(1, len(means) + 1))
        # The golden records declare nothing: the test-tuned track alone, its best on top,
        # the others under it.
        assert _best(ranking) == [ranking["lines"][0]]
        honest, tuned = ranking["tops"]
        assert (honest["track"], honest["line"], honest["missing"]) == (
            "honest", None, "all here are test-tuned")
        assert (tuned["track"], tuned["line"]) == ("test-tuned", ranking["lines"][0])
        assert ranking["shown"] + ranking["folded"] == ranking["lines"][1:]
    at_1 = next(line for line in label_dp[0]["lines"] if line["n"] == 2)
    assert (at_1["method"], at_1["mean"], at_1["badge"]) == (
        "lp-1st", 95.0, "label-DP · sub · pure")
    # its twin's strongest bound, its release's, judged at its share of the cell's 5%
    assert at_1["paper"]["value"] == 95.34
    assert at_1["audit"]["strongest"] == pytest.approx(0.8886, abs=1e-4)
    reference = mnist["reference"]
    assert [r["epsilon"] for r in reference] == [math.inf] and not _best(reference[0])


def test_a_refuted_configuration_is_never_the_best(rows):
    adult = rankings(rows)[-1]
    (ranking,) = adult["families"][0]["rankings"]
    refuted = [line for line in ranking["lines"] if line["refuted"]]
    assert refuted and not any(line["best"] for line in refuted)
    assert len(_best(ranking)) == 1


def test_a_configuration_without_a_proven_bound_is_never_the_best(rows):
    """Marked so by privboard submit: its DP-SGD took shuffled batches, accounted as
    Poisson. It keeps its place by its mean, with its mark; the next one is the best."""
    top = rankings(rows)[0]["families"][0]["rankings"][0]["lines"][0]
    marked = rows.assign(no_proven_bound=rows["cell"].map(slug) == top["page"])
    lines = rankings(marked)[0]["families"][0]["rankings"][0]["lines"]
    assert lines[0]["page"] == top["page"] and not lines[0]["best"] and lines[1]["best"]
    assert lines[0]["unproven"] == SHUFFLED_BATCHES and not lines[1]["unproven"]


def test_each_track_has_its_best_on_top(rows):
    """A configuration declared a priori (in the catalogue beside its records) is in the
    honest track: the best of it, though ranked below the test-tuned best."""
    ranking = rankings(rows)[0]["families"][0]["rankings"][0]
    second = ranking["lines"][1]
    declared = rows.assign(chosen=rows["chosen"].where(rows["cell"].map(slug) != second["page"],
                                                       "a priori"))
    ranking = rankings(declared)[0]["families"][0]["rankings"][0]
    honest, tuned = ranking["tops"]
    assert (honest["line"]["page"], honest["line"]["rank"], honest["line"]["best"]) == (
        second["page"], 2, "honest")
    assert tuned["line"]["rank"] == 1 and tuned["line"]["best"] == "test-tuned"
    assert all(not line["best"] for line in ranking["shown"] + ranking["folded"])


def test_a_new_method_on_a_new_model_and_suite_takes_its_place(rows):
    mine = rows[(rows.dataset == "mnist") & (rows.method == "lp-1st") & (rows.n > 0)
                & (rows.epsilon == 1)].iloc[[0]]
    new = mine.assign(method="alibi", model="small-cnn", suite="label-dp-small",
                      cell="new-cell", mean=99.0)
    ranking = rankings(pd.concat([rows, new], ignore_index=True))[0]["families"][0]
    first = ranking["rankings"][0]["lines"][0]
    assert (first["method"], first["model"], first["suite"], first["best"]) == (
        "alibi", "small-cnn", "label-dp-small", "test-tuned")
    smoke = new.assign(suite="smoke", cell="smoke-cell", mean=100.0)
    ranking = rankings(pd.concat([rows, smoke], ignore_index=True))[0]["families"][0]
    assert ranking["rankings"][0]["lines"][0]["suite"] != "smoke"
