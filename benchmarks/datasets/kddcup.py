"""KDD Cup 1999 intrusion detection as a binary task: 0 = normal connection, 1 = attack.

Train on the official 10% sample (kddcup.data_10_percent.gz, 494,021 rows), test on the
relabelled test set (corrected.gz, 311,029 rows). 41 features: 3 symbolic columns are
one-hot encoded over fixed lists, the rest scaled into [0, 1] by fixed ranges.
"""
from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from benchmarks.contract import Split
from benchmarks.datasets.core import UCI_LICENCE, DataError, DatasetSpec, register
from benchmarks.datasets.tabular import Linear, Log, OneHot, encode, read_rows

TRAIN_FILE = "kddcup.data_10_percent.gz"
TEST_FILE = "corrected.gz"

PROTOCOLS = ("tcp", "udp", "icmp")
# The 70 network services named in the KDD Cup 1999 data (train and test).
SERVICES = ("aol", "auth", "bgp", "courier", "csnet_ns", "ctf", "daytime", "discard",
            "domain", "domain_u", "echo", "eco_i", "ecr_i", "efs", "exec", "finger", "ftp",
            "ftp_data", "gopher", "harvest", "hostnames", "http", "http_2784", "http_443",
            "http_8001", "imap4", "IRC", "iso_tsap", "klogin", "kshell", "ldap", "link",
            "login", "mtp", "name", "netbios_dgm", "netbios_ns", "netbios_ssn", "netstat",
            "nnsp", "nntp", "ntp_u", "other", "pm_dump", "pop_2", "pop_3", "printer",
            "private", "red_i", "remote_job", "rje", "shell", "smtp", "sql_net", "ssh",
            "sunrpc", "supdup", "systat", "telnet", "tftp_u", "tim_i", "time", "urh_i",
            "urp_i", "uucp", "uucp_path", "vmnet", "whois", "X11", "Z39_50")
FLAGS = ("OTH", "REJ", "RSTO", "RSTOS0", "RSTR", "S0", "S1", "S2", "S3", "SF", "SH")

FLAG01 = Linear(0, 1)       # binary indicators and rates are already in [0, 1]
SMALL_COUNT = Log(1e4)      # counts of events within one connection
# count/srv_count look back over 2 seconds and are capped at 511 by the feature
# extractor; the dst_host_* counts look back over 100 connections, capped at 255.
SCHEMA = (
    Log(1e5),               # duration (seconds)
    OneHot(PROTOCOLS), OneHot(SERVICES), OneHot(FLAGS),
    Log(1e9), Log(1e9),     # src_bytes, dst_bytes
    FLAG01,                 # land
    *(SMALL_COUNT,) * 4,    # wrong_fragment, urgent, hot, num_failed_logins
    FLAG01,                 # logged_in
    SMALL_COUNT,            # num_compromised
    FLAG01,                 # root_shell
    SMALL_COUNT,            # su_attempted
    *(SMALL_COUNT,) * 5,    # num_root, num_file_creations, num_shells, num_access_files,
                            # num_outbound_cmds
    FLAG01, FLAG01,         # is_host_login, is_guest_login
    Linear(0, 511), Linear(0, 511),  # count, srv_count
    *(FLAG01,) * 7,         # serror_rate .. srv_diff_host_rate
    Linear(0, 255), Linear(0, 255),  # dst_host_count, dst_host_srv_count
    *(FLAG01,) * 8,         # dst_host_same_srv_rate .. dst_host_srv_rerror_rate
)


def _split(spec: DatasetSpec, root: Path, filename: str) -> Split:
    path, data = spec.read_verified(root, filename)
    try:
        frame = read_rows(gzip.decompress(data), columns=len(SCHEMA) + 1)
        x = encode(frame, SCHEMA)
    except (OSError, EOFError, ValueError) as error:
        raise DataError(path, f"not readable ({error})", spec.expected(filename),
                        spec.where(root)) from error
    y = (frame[len(SCHEMA)] != "normal.").to_numpy(dtype=np.int64)
    return Split(x, y)


def read_kddcup(spec: DatasetSpec, root: Path) -> tuple[Split, Split]:
    return _split(spec, root, TRAIN_FILE), _split(spec, root, TEST_FILE)


register(DatasetSpec(
    name="kddcup99", task="tabular", num_classes=2,
    citation="Stolfo, Fan, Lee, Prodromidis, Chan. KDD Cup 1999 Data. UCI Machine Learning "
             "Repository, doi:10.24432/C51C7N.",
    checksums=(
        # scikit-learn's registered sha256 of the 10% file (sklearn.datasets._kddcup99).
        (TRAIN_FILE, "sha256:8045aca0d84e70e622d1148d7df782496f6333bf6eb979a1b0837c42a9fd9561"),
        # The sha256 of UCI's corrected.gz as recorded in a public dataset-download config;
        # scikit-learn registers no test file, so this value has a single public source.
        (TEST_FILE, "sha256:abd8165508378859b07e38537271f0ebf8a4d7319f643188cd7361e939a05c43"),
    ),
    reader=read_kddcup, obtain="https://kdd.ics.uci.edu/databases/kddcup99/",
    licence=UCI_LICENCE,
))
