"""Generate Python stubs from protos/ into services/contract/genproto/.

grpc_tools emits absolute imports (`from rag.indexer.v1 import ...`); they are
rewritten to the package the stubs live in, so nothing touches sys.path.
Usage: python scripts/gen_protos.py [OUT_DIR]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "protos"
DEFAULT_OUT = ROOT / "services" / "contract" / "genproto"
PACKAGE = "services.contract.genproto"
_IMPORT = re.compile(r"^from rag\.", re.MULTILINE)
_IMPORT_PLAIN = re.compile(r"^import rag\.", re.MULTILINE)


def generate(out_dir: Path) -> list[Path]:
    protos = sorted(PROTO_DIR.rglob("*.proto"))
    out_dir.mkdir(parents=True, exist_ok=True)
    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_DIR}",
        f"--python_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        f"--plugin=protoc-gen-mypy={Path(sys.executable).parent / 'protoc-gen-mypy'}",
        f"--mypy_out={out_dir}",
        *[str(p) for p in protos],
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    for path in out_dir.rglob("*.py*"):
        text = path.read_text()
        text = _IMPORT.sub(f"from {PACKAGE}.rag.", text)
        text = _IMPORT_PLAIN.sub(f"import {PACKAGE}.rag.", text)
        path.write_text(text)
    for directory in [out_dir, *[d for d in out_dir.rglob("*") if d.is_dir()]]:
        if directory.name != "__pycache__":
            (directory / "__init__.py").touch()
    return sorted(p for p in out_dir.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT
    files = generate(target)
    print(f"generated {len(files)} files into {target}")
