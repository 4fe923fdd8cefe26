"""PEP 517 build backend of the ``orbitkv`` distribution (stdlib only).

The distribution is pure Python, so a wheel is a zip of the ``orbitkv`` package plus the
``.dist-info`` files (METADATA, WHEEL, RECORD) that PEP 427 and the core metadata specification
define. Writing them here keeps ``pip install ./clients/python`` and the release build free of
any download (no setuptools); the wheel is reproducible (sorted entries, fixed timestamps).

Also a command: ``python3 build_backend.py OUT_DIR`` writes the wheel into OUT_DIR and prints its
path (the release tarball's build calls it).
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import sys
import tarfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
_EPOCH = (1980, 1, 1, 0, 0, 0)


def _project() -> dict:
    with open(os.path.join(HERE, "pyproject.toml"), "rb") as f:
        raw = f.read()
    try:
        import tomllib  # Python >= 3.11
        return tomllib.loads(raw.decode("utf-8"))["project"]
    except ImportError:  # the few fields this backend reads, from the file this directory owns
        text = raw.decode("utf-8")
        project = text.split("[project]", 1)[1].split("\n[", 1)[0]
        field = lambda k: re.search(rf'^{k}\s*=\s*"([^"]*)"', project, re.M).group(1)  # noqa: E731
        extras_block = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
        extras = {m.group(1): re.findall(r'"([^"]+)"', m.group(2))
                  for m in re.finditer(r"^(\w+)\s*=\s*\[([^\]]*)\]", extras_block, re.M)}
        return {"name": field("name"), "version": field("version"), "description": field("description"),
                "requires-python": field("requires-python"), "optional-dependencies": extras,
                "license": {"text": "Apache-2.0"}}


def _metadata(project: dict) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}", f"Version: {project['version']}",
             f"Summary: {project['description']}", f"Requires-Python: {project['requires-python']}",
             f"License: {project.get('license', {}).get('text', '')}"]
    for extra, requirements in sorted(project.get("optional-dependencies", {}).items()):
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {r}; extra == "{extra}"' for r in requirements]
    readme = os.path.join(HERE, "README.md")
    body = ""
    if os.path.exists(readme):
        lines.append("Description-Content-Type: text/markdown")
        with open(readme, encoding="utf-8") as f:
            body = "\n" + f.read()
    return "\n".join(lines) + "\n" + body


def _package_files() -> list:
    out = []
    for directory, dirs, files in os.walk(os.path.join(HERE, "orbitkv")):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        out += [os.path.join(directory, f) for f in sorted(files) if f.endswith(".py")]
    return sorted(out)


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _write(zf: zipfile.ZipFile, name: str, data: bytes, record: list) -> None:
    info = zipfile.ZipInfo(name, date_time=_EPOCH)
    info.external_attr = 0o644 << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    zf.writestr(info, data)
    record.append(_record_line(name, data))


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None) -> str:
    project = _project()
    dist = f"{project['name']}-{project['version']}"
    wheel_name = f"{dist}-py3-none-any.whl"
    os.makedirs(wheel_directory, exist_ok=True)
    path = os.path.join(wheel_directory, wheel_name)
    record: list = []
    with zipfile.ZipFile(path, "w") as zf:
        for file in _package_files():
            with open(file, "rb") as f:
                _write(zf, os.path.relpath(file, HERE).replace(os.sep, "/"), f.read(), record)
        info = f"{dist}.dist-info"
        _write(zf, f"{info}/METADATA", _metadata(project).encode("utf-8"), record)
        _write(zf, f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: orbitkv build_backend\n"
                                    b"Root-Is-Purelib: true\nTag: py3-none-any\n", record)
        licence = os.path.join(HERE, "..", "..", "LICENSE")  # the repository's, when built from a checkout
        if os.path.exists(licence):
            with open(licence, "rb") as f:
                _write(zf, f"{info}/LICENSE", f.read(), record)
        record.append(f"{info}/RECORD,,")
        info_record = zipfile.ZipInfo(f"{info}/RECORD", date_time=_EPOCH)
        info_record.external_attr = 0o644 << 16
        zf.writestr(info_record, "\n".join(record) + "\n")
    return wheel_name


def get_requires_for_build_wheel(config_settings=None) -> list:
    return []


def build_sdist(sdist_directory, config_settings=None) -> str:
    """The source distribution: this directory's build files and package, plus PKG-INFO."""
    project = _project()
    dist = f"{project['name']}-{project['version']}"
    os.makedirs(sdist_directory, exist_ok=True)
    name = f"{dist}.tar.gz"
    files = [os.path.join(HERE, f) for f in ("pyproject.toml", "build_backend.py", "README.md")
             if os.path.exists(os.path.join(HERE, f))] + _package_files()
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for file in files:
            info = tar.gettarinfo(file, f"{dist}/{os.path.relpath(file, HERE)}")
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            with open(file, "rb") as f:
                tar.addfile(info, f)
        metadata = _metadata(project).encode("utf-8")
        info = tarfile.TarInfo(f"{dist}/PKG-INFO")
        info.size, info.mode = len(metadata), 0o644
        tar.addfile(info, io.BytesIO(metadata))
    return name


def get_requires_for_build_sdist(config_settings=None) -> list:
    return []


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: python3 build_backend.py OUT_DIR", file=sys.stderr)
        sys.exit(2)
    print(os.path.join(sys.argv[1], build_wheel(sys.argv[1])))
