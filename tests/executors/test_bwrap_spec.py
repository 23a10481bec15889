"""`BwrapSpec`, the one bubblewrap command-line builder: real bwrap runs of what every sandbox
gets whatever its spec (no capabilities, no nested user namespace, read-only kernel knobs, no
network unless allowed) and of what a spec chooses (a minimal root instead of the host, the
uid, a bounded /tmp, a read-only remount of the root, mounts shown through the private /tmp)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from toolkeeper.executors.sandbox import (
    BWRAP,
    HOST_ROOT,
    BwrapSpec,
    Mount,
    minimal_root,
)

pytestmark = pytest.mark.skipif(shutil.which(BWRAP) is None, reason="bubblewrap is not installed")

ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


def sh(spec: BwrapSpec, script: str, *, env: dict[str, str] | None = None) -> tuple[int, str]:
    done = subprocess.run(
        spec.argv(["sh", "-c", script]),
        env=env or ENV,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr


MINIMAL = BwrapSpec(base=minimal_root(), uid=65534, remount_root_read_only=True, chdir="/tmp")
BASES: Sequence[tuple[Mount, ...]] = (HOST_ROOT, minimal_root())


@pytest.mark.parametrize("base", BASES, ids=["host", "minimal"])
def test_every_spec_drops_every_capability_and_nested_user_namespaces(
    base: tuple[Mount, ...],
) -> None:
    _, out = sh(
        BwrapSpec(base=base),
        "grep -E '^Cap(Eff|Prm|Bnd):' /proc/self/status; unshare -U true && echo NESTED",
    )
    caps = [line.split()[1] for line in out.splitlines() if line.startswith("Cap")]
    assert caps and set(caps) == {"0000000000000000"}, out
    assert "NESTED" not in out


@pytest.mark.parametrize("base", BASES, ids=["host", "minimal"])
def test_every_spec_shows_the_kernel_knobs_read_only(base: tuple[Mount, ...]) -> None:
    _, out = sh(
        BwrapSpec(base=base),
        "echo 1 > /proc/sys/kernel/domainname && echo WROTE; grep -w /proc/sys /proc/self/mounts",
    )
    assert "WROTE" not in out
    assert " ro," in out or " ro " in out, out


def test_the_network_is_the_specs_choice() -> None:
    # /proc/net/dev is per network namespace: a new one has only the loopback device.
    script = "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"
    _, closed = sh(BwrapSpec(base=HOST_ROOT), script)
    _, open_ = sh(BwrapSpec(base=HOST_ROOT, network=True), script)
    assert closed.split() == ["lo"]
    assert set(open_.split()) == {line.split(":")[0].strip() for line in _host_devices()}


def _host_devices() -> list[str]:
    return Path("/proc/net/dev").read_text().splitlines()[2:]


def test_a_minimal_root_holds_the_programs_and_no_other_host_file() -> None:
    code, out = sh(MINIMAL, "id -u; id -g; ls /; test -e /etc/passwd && echo ETC; exit 0")
    lines = out.split()
    assert code == 0, out
    assert lines[:2] == ["65534", "65534"]
    assert "ETC" not in lines
    assert {"usr", "tmp", "proc", "dev"} <= set(lines[2:])
    assert "root" not in lines and "home" not in lines and "etc" not in lines


def test_the_remounted_root_is_read_only_and_tmp_is_private_and_bounded() -> None:
    spec = BwrapSpec(
        base=minimal_root(),
        uid=65534,
        tmp_bytes=1024 * 1024,
        remount_root_read_only=True,
        chdir="/tmp",
    )
    _, out = sh(
        spec,
        "mkdir /probe 2>/dev/null && echo ROOT-WRITABLE; echo ok > /tmp/f && cat /tmp/f; "
        "head -c 2000000 /dev/zero > /tmp/big 2>/dev/null || echo FULL",
    )
    assert "ROOT-WRITABLE" not in out
    assert out.split()[:1] == ["ok"]
    assert "FULL" in out

    _, unbounded = sh(BwrapSpec(base=minimal_root()), "mkdir /probe && echo ROOT-WRITABLE")
    assert "ROOT-WRITABLE" in unbounded  # without the remount, bwrap's root tmpfs is writable


def test_mounts_after_the_private_tmp_show_through_it(tmp_path: Path) -> None:
    shown = tmp_path / "shown"
    shown.mkdir()
    (shown / "file").write_text("visible\n")
    writable = tmp_path / "writable"
    writable.mkdir()
    spec = BwrapSpec(
        base=minimal_root(),
        mounts=(Mount("ro-bind", str(shown)), Mount("bind", str(writable))),
    )
    _, out = sh(
        spec,
        f"cat {shown}/file; touch {shown}/new 2>/dev/null && echo RO-WROTE; "
        f"echo made > {writable}/out",
    )
    assert out.split()[:1] == ["visible"]
    assert "RO-WROTE" not in out and not (shown / "new").exists()
    assert (writable / "out").read_text() == "made\n"


def test_the_environment_is_the_one_bwrap_is_started_with_less_the_unset_names() -> None:
    _, out = sh(
        BwrapSpec(base=minimal_root(), unset=("DROPPED",)),
        "env | sort",
        env={**ENV, "KEPT": "1", "DROPPED": "2"},
    )
    names = {line.split("=", 1)[0] for line in out.splitlines()}
    assert "KEPT" in names and "DROPPED" not in names
    assert names <= {"PATH", "LANG", "KEPT", "PWD"}


def test_a_symlink_mount_says_what_it_points_to() -> None:
    assert Mount("symlink", "/bin", "usr/bin").args() == ["--symlink", "usr/bin", "/bin"]
    assert Mount("ro-bind", "/usr").args() == ["--ro-bind", "/usr", "/usr"]
    assert Mount("tmpfs", "/root").args() == ["--tmpfs", "/root"]


def test_the_command_is_the_namespaces_init_when_the_spec_says_so() -> None:
    """``command_is_init``: the command is pid 1 of its namespace, the only process there
    (no init of bwrap's above it), and its status is still bwrap's."""
    for is_init, expected in ((False, "2 1 2"), (True, "1 0 1")):
        spec = BwrapSpec(base=minimal_root(), command_is_init=is_init)
        code, out = sh(spec, "set -- /proc/[0-9]*; echo $$ $PPID $#")
        assert (code, out.split()) == (0, expected.split()), (is_init, out)
    assert sh(BwrapSpec(base=minimal_root(), command_is_init=True), "exit 7")[0] == 7
