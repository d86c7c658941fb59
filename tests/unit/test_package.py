"""What installing elastic-sps puts in an environment: one package, ``elastic_sps``, so a
user project with its own ``shared`` or ``services`` package can live beside it."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel_names(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    out = tmp_path_factory.mktemp("wheel")
    cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    done = subprocess.run(
        [*cmd, "-w", str(out), str(ROOT)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    (wheel,) = out.glob("elastic_sps-*.whl")
    return zipfile.ZipFile(wheel).namelist()


def test_the_wheel_installs_one_top_level_package(wheel_names: list[str]) -> None:
    tops = {name.split("/")[0] for name in wheel_names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"elastic_sps"}


def test_the_wheel_holds_the_services_and_the_data_files(wheel_names: list[str]) -> None:
    assert "elastic_sps/api.py" in wheel_names
    assert "elastic_sps/services/dataplane/source.py" in wheel_names
    assert "elastic_sps/topologies/twitter.yaml" in wheel_names
    assert "elastic_sps/bundled_traces/spikes.csv" in wheel_names


def test_a_project_with_its_own_services_package_imports_both(tmp_path: Path) -> None:
    """Run from outside the repository, beside a user's ``services`` and ``shared``."""
    for name in ("services", "shared"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"NAME = {name!r}\n")
    code = (
        "import services, shared\n"
        "from elastic_sps.api import Context, check, run_local\n"
        "import elastic_sps.services.plan.core\n"
        "assert services.NAME == 'services' and shared.NAME == 'shared'\n"
        "assert 'site-packages' not in services.__file__\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_nothing_named_shared_or_services_is_installed(tmp_path: Path) -> None:
    code = "import importlib.util as u\nprint(u.find_spec('shared'), u.find_spec('services'))\n"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["None", "None"]
