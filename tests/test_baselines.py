import math

import pytest

import baselines
from baselines import BaselinesError, load_claims, load_published


def test_published_loads_typed_with_the_mnist_table4_cell():
    published = load_published()
    cell = published[(published.dataset == "mnist") & (published.method == "lp-1st")
                     & (published.epsilon == 1.0)]
    assert len(cell) == 1
    row = cell.iloc[0]
    assert row.value == 95.34
    assert row.column_inferred
    assert (row.paper, row.table, row.column) == ("Ghazi et al. 2021", "Table 4", "e=1")
    assert (row.protects, row.neighbours, row.kind) == ("labels", "substitution", "pure")


def test_non_private_lp_cells_are_filed_under_non_private():
    published = load_published()
    inf = published[(published.table == "Table 4") & (published.epsilon == math.inf)
                    & (published.dataset == "mnist")]
    assert set(inf.method) >= {"non-private"}
    assert not (published[published.method.str.startswith("lp-")].epsilon == math.inf).any()


def test_barber_epsilon_is_the_label_flip_epsilon_and_not_a_model_notion():
    published = load_published()
    spread = published[published.method == "spread-lr"].iloc[0]
    assert spread.epsilon == pytest.approx(math.log(0.8 / 0.2))
    assert spread.protects not in ("labels", "inputs and labels", "nothing")


def test_every_paper_cell_appears_once():
    published = load_published()
    keys = ["paper", "table", "column", "dataset", "method", "variant"]
    assert not published.duplicated(keys).any()


def test_claims_load():
    claims = load_claims()
    assert "objective-beats-output-adult" in set(claims.claim_id)
    assert set(claims.columns) == set(baselines.CLAIMS_COLUMNS)


def _copy_with(tmp_path, source, old, new):
    text = source.read_text()
    assert old in text
    path = tmp_path / source.name
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize("old, new, message", [
    (",lp-1st,", ",lp-1sst,", "unknown method 'lp-1sst'; did you mean 'lp-1st'?"),
    (",95.34,", ",95.3.4,", "value '95.3.4' is not a number"),
    ("paper,table,", "paper,tabel,", "missing column(s) table"),
    (",1,0,accuracy_pct,59.96,labels,substitution,pure",
     ",1,1e-5,accuracy_pct,59.96,labels,substitution,pure", "a pure notion needs delta 0"),
])
def test_malformed_published_gives_one_clear_line(tmp_path, old, new, message):
    path = _copy_with(tmp_path, baselines.PUBLISHED_CSV, old, new)
    with pytest.raises(BaselinesError) as error:
        load_published(path)
    assert message in str(error.value)
    assert str(path) in str(error.value) and "\n" not in str(error.value)


def test_duplicate_claim_is_rejected(tmp_path):
    text = baselines.CLAIMS_CSV.read_text()
    path = tmp_path / "claims.csv"
    path.write_text(text + text.splitlines()[1] + "\n")
    with pytest.raises(BaselinesError, match="duplicate claim_id"):
        load_claims(path)


def test_missing_file(tmp_path):
    with pytest.raises(BaselinesError, match="file not found"):
        load_published(tmp_path / "nope.csv")


def test_dataset_notes_load_and_say_where_no_table_exists():
    notes = baselines.load_dataset_notes()
    assert "no table" in notes["adult"]
    assert set(notes) <= baselines.DATASETS


def test_the_papers_models_are_named_only_where_their_source_names_them():
    """Ghazi et al. 2021, Appendix B: the simplified Inception on MNIST, Fashion-MNIST and
    KMNIST, ResNet18-v2 on CIFAR, two-branch NCF on MovieLens. The baselines it quotes
    from other papers name none."""
    published = load_published()
    ghazi = published[published.paper == "Ghazi et al. 2021"]
    own = ghazi.method.isin(["lp-1st", "lp-2st", "non-private"])
    assert ghazi[own].groupby("dataset").model.unique().map(list).to_dict() == {
        "mnist": ["Inception"], "fashion-mnist": ["Inception"], "kmnist": ["Inception"],
        "cifar10": ["ResNet18-v2"], "cifar100": ["ResNet18-v2"], "movielens-1m": ["NCF"]}
    assert (ghazi[~own].model == "").all()


def test_a_second_non_private_cell_of_one_model_is_rejected(tmp_path):
    text = baselines.PUBLISHED_CSV.read_text()
    line = next(line for line in text.splitlines() if ",fashion-mnist,non-private," in line)
    path = tmp_path / "published.csv"
    path.write_text(text + line.replace(",e=inf,", ",e=inf again,") + "\n")
    appended = len(text.splitlines()) + 1
    with pytest.raises(BaselinesError, match=f"line {appended}: a second non-private cell"):
        load_published(path)
