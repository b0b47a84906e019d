"""An installed nodecheck (a wheel, not this checkout) finds its shipped playbooks and runs."""
import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_wheel_ships_the_playbooks_and_an_install_finds_them(tmp_path):
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                            "-w", str(tmp_path / "dist"), str(ROOT)], capture_output=True, text=True,
                           cwd=tmp_path)
    assert build.returncode == 0, build.stderr
    [wheel] = list((tmp_path / "dist").glob("nodecheck-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert {"nodecheck/playbooks/default.yml", "nodecheck/playbooks/demo.yml"} <= set(names)
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site),
                    str(wheel)], check=True, capture_output=True)
    # from an unrelated directory, with the installed copy first on the path
    probe = ("import nodecheck.playbook as p; b = p.load_playbook('default'); "
             "print(p.__file__); print(b.path)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path,
                         env=dict(os.environ, PYTHONPATH=str(site)), check=True).stdout.split()
    assert out == [str(site / "nodecheck/playbook.py"), str(site / "nodecheck/playbooks/default.yml")]
