"""The package works when installed from a built wheel into a fresh virtualenv, not only
editable: the scenario library and data files ship inside it."""
import os
import subprocess
import sys
import venv
import zipfile

import pytest


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(out), root], check=True, capture_output=True)
    [whl] = out.glob("crashlab-*.whl")
    return whl


def test_wheel_ships_the_library_under_one_top_level_package(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("crashlab/scenarios/") and n.endswith(".yaml") for n in names)
    assert "crashlab/reference_impl/__init__.py" in names and "crashlab/gallery/__init__.py" in names
    assert "crashlab/plugin.py" in names and "crashlab/py.typed" in names
    assert any(n.endswith("entry_points.txt") for n in names)
    top = {n.split("/", 1)[0] for n in names if "/" in n and not n.split("/", 1)[0].endswith(".dist-info")}
    assert top == {"crashlab"}, f"the wheel installs other top-level names: {sorted(top - {'crashlab'})}"


def test_installed_wheel_runs_from_anywhere(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", str(wheel)],
                   check=True, capture_output=True)
    work = tmp_path / "elsewhere"
    work.mkdir()
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    crashlab = str(env_dir / "bin" / "crashlab")
    listed = subprocess.run([crashlab, "list", "--json"], cwd=work, env=clean, capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    assert '"id"' in listed.stdout
    where = subprocess.run([str(py), "-c", "import crashlab, crashlab.reference_impl, crashlab.gallery.retries; "
                                           "print(crashlab.__file__)"],
                           cwd=work, env=clean, capture_output=True, text=True, check=True)
    assert str(env_dir) in where.stdout, "must import the installed copy, not the source tree"
