"""KAIOJIT_DUMP writes each compiled kernel's stages (read once, at import: a subprocess)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = textwrap.dedent('''
    import kaiojit as kj

    def scale(out, x):
        i = kj.grid(1)
        out[i] = x[i] * 2.0

    kj.compile_ptx(scale, "void(float32[::1], float32[::1])")
''')


def run_with_dump(tmp_path, stages: str, script_text: str = SCRIPT) -> dict[str, str]:
    files, _ = run_with_dump_and_stderr(tmp_path, stages, script_text)
    return files


def run_with_dump_and_stderr(tmp_path, stages: str, script_text: str = SCRIPT
                             ) -> tuple[dict[str, str], str]:
    script = tmp_path / "kernel_file.py"
    script.write_text(script_text)
    dump_dir = tmp_path / "dump"
    env = dict(os.environ, KAIOJIT_DUMP=stages, KAIOJIT_DUMP_DIR=str(dump_dir),
               PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    if not dump_dir.exists():
        return {}, r.stderr
    return {p.name: p.read_text() for p in dump_dir.iterdir()}, r.stderr


def test_dump_writes_the_requested_stages(tmp_path):
    files = run_with_dump(tmp_path, "kir,llvm,ptx")
    by_stage = {name.split(".")[-1]: text for name, text in files.items()}
    assert set(by_stage) == {"kir", "llvm", "ptx"}
    assert set(files) == {f"scale.float32_1_float32_1.{s}" for s in ("kir", "llvm", "ptx")}
    assert by_stage["kir"].startswith("kernel scale(out: float32[::1], x: float32[::1])")
    assert "define ptx_kernel void @scale_" in by_stage["llvm"]
    assert ".entry scale_" in by_stage["ptx"] and "ld.global.nc" in by_stage["ptx"]


def test_dump_of_one_stage_only(tmp_path):
    files = run_with_dump(tmp_path, "ptx")
    assert len(files) == 1 and next(iter(files)).endswith(".ptx")


def test_dumps_are_named_kernel_signature_stage_and_announced_once(tmp_path):
    two_signatures = SCRIPT + textwrap.dedent('''
        kj.compile_ptx(scale, "void(float64[::1], float64[::1])")
        kj.compile_ptx(scale, "void(int32[:], int32[:])")
    ''')
    files, stderr = run_with_dump_and_stderr(tmp_path, "ptx", two_signatures)
    assert set(files) == {"scale.float32_1_float32_1.ptx", "scale.float64_1_float64_1.ptx",
                          "scale.int32_int32.ptx"}
    announced = [line for line in stderr.splitlines() if line.startswith("kaiojit: ")]
    assert announced == [f"kaiojit: KAIOJIT_DUMP writes kernel.signature.stage files to "
                         f"{tmp_path / 'dump'}"]


def test_no_dump_without_the_variable(tmp_path):
    assert run_with_dump(tmp_path, "") == {}


def test_import_and_compile_do_not_import_numpy(tmp_path):
    script = tmp_path / "no_numpy.py"
    script.write_text(SCRIPT + "import sys\nassert 'numpy' not in sys.modules, 'numpy imported'\n")
    r = subprocess.run([sys.executable, str(script)], env=dict(os.environ, PYTHONPATH=ROOT),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
