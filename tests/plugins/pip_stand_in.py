"""``pip install -e DIR`` of an example package, as the README's commands run it, without
touching any environment: the package's folders linked into the site folder that
PRIVBOARD_TEST_SITE names, and beside them the metadata pip writes, its entry points
included (installed.dist_info). Anything else pip could be asked fails, so that the
README cannot ask a newcomer for a command this stand-in does not check.

    python pip_stand_in.py install [-c FILE] [--extra-index-url URL] -e DIR
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import sys
import tomllib
from pathlib import Path

from installed import dist_info
from benchmarks import registry


def install(package: Path, site: Path) -> None:
    project = tomllib.loads((package / "pyproject.toml").read_text())
    meta = project["project"]
    for requirement in meta["dependencies"]:
        name, extra = re.fullmatch(r"([\w-]+)(?:\[(\w+)\])?", requirement).groups()
        if extra == "opacus" and importlib.util.find_spec("opacus") is None:
            sys.exit(f"pip: {requirement} needs the opacus extra, which is not installed")
    for folder in project["tool"]["setuptools"]["packages"]:
        link = site / folder
        if link.is_symlink():
            link.unlink()
        link.symlink_to(package.resolve() / folder, target_is_directory=True)
    for old in site.glob(f"{meta['name'].replace('-', '_')}-*.dist-info"):
        shutil.rmtree(old)
    dist_info(site, meta["name"], meta["version"],
              meta["entry-points"][registry.ENTRY_POINT_GROUP])
    print(f"Successfully installed {meta['name']}-{meta['version']}")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="pip")
    parser.add_argument("command", choices=["install"])
    parser.add_argument("-c", dest="constraints", type=Path)
    parser.add_argument("--extra-index-url")
    parser.add_argument("-e", dest="editable", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.constraints is not None and not args.constraints.is_file():
        sys.exit(f"pip: no constraints file {args.constraints}")
    install(args.editable, Path(os.environ["PRIVBOARD_TEST_SITE"]))


if __name__ == "__main__":
    main(sys.argv[1:])
