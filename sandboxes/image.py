"""The sandbox image: Debian bookworm with python3, numpy and pandas, tagged by the content of its recipe.

numpy and pandas are there because real solutions and real tests use them (the verifier carries numpy scalars
and arrays across its wire; tests of data tasks build DataFrames and compare with `.equals`); an image without
them would fail those solutions as runtime errors. Debian's packages, not PyPI's: pandas 1.5.3 and numpy 1.24
from bookworm, no recommends (matplotlib, scipy, numba stay out): 237 MB against 169 MB for python3 + numpy.
Two ways to build the same thing. Where a registry is reachable, the Dockerfile beside this file
(`FROM debian:bookworm-slim` + python3, python3-numpy, python3-pandas). Where none is (these machines), offline:
`debootstrap --variant=minbase --include=python3,python3-numpy,python3-pandas bookworm ROOTFS` from the Debian
mirror apt already uses (no PyPI), trimmed, then `tar -C ROOTFS -c . | docker import`. The tag is a hash of both
recipes, so an image is rebuilt only when a recipe changes; `ensure_image` reuses a present one.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from importlib.resources import files
from pathlib import Path

REPOSITORY = "rlvr-sandbox"
SUITE = "bookworm"
DEBOOTSTRAP_ARGS = ("--variant=minbase", "--include=python3,python3-numpy,python3-pandas")
TRIM = ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man", "usr/share/locale",
        "usr/share/info")
BUILD_VERSION = "1"  # bump when the build steps below change what ends up in the image
DEFAULT_MIRROR = "http://deb.debian.org/debian"


def dockerfile_text() -> str:
    return files("rlvr.sandboxes").joinpath("Dockerfile").read_text()


def image_tag() -> str:
    """`rlvr-sandbox:<12 hex>`: a hash of the Dockerfile and the debootstrap recipe."""
    recipe = "\n".join([BUILD_VERSION, SUITE, *DEBOOTSTRAP_ARGS, *TRIM, dockerfile_text()])
    return f"{REPOSITORY}:{hashlib.sha256(recipe.encode()).hexdigest()[:12]}"


def image_present(client, tag: str | None = None) -> bool:
    import docker

    try:
        client.images.get(tag or image_tag())
        return True
    except docker.errors.ImageNotFound:
        return False


def ensure_image(client, builder: str = "auto", log: Callable[[str], None] = print, force: bool = False) -> str:
    """The image's tag, building it first when absent (or when `force`). builder: auto|dockerfile|debootstrap."""
    tag = image_tag()
    if not force and image_present(client, tag):
        log(f"image {tag} present; nothing to build")
        return tag
    if builder not in ("auto", "dockerfile", "debootstrap"):
        raise ValueError(f"unknown image builder {builder!r}; use auto, dockerfile or debootstrap")
    if builder in ("auto", "dockerfile"):
        try:
            build_from_dockerfile(client, tag, log)
            return tag
        except Exception as error:  # no registry reachable: fall back (auto) or report (dockerfile)
            if builder == "dockerfile":
                raise RuntimeError(f"Dockerfile build of {tag} failed: {error}") from error
            log(f"Dockerfile build unavailable ({str(error).splitlines()[0][:160]}); building offline with debootstrap")
    build_with_debootstrap(client, tag, log)
    return tag


def ensure_image_on_hosts(hosts: list[str], builder: str = "auto", log: Callable[[str], None] = print,
                          force: bool = False) -> str:
    """The image on every host: built (when absent, or `force`) on the first, then copied to each other host
    that lacks it, engine to engine (`docker save | docker load` through the SDK, streamed; no registry)."""
    from rlvr.sandboxes.hosts import connect, describe

    clients = [connect(host) for host in hosts]  # every engine answers before anything is built
    if len(hosts) > 1:
        log(f"first host: {describe(hosts[0])} (built there when absent, then copied to the others)")
    tag = ensure_image(clients[0], builder=builder, log=log, force=force)
    for host, client in zip(hosts[1:], clients[1:], strict=True):
        if not force and image_present(client, tag):
            log(f"image {tag} present on {describe(host)}")
            continue
        log(f"copying {tag} from {describe(hosts[0])} to {describe(host)}")
        copy_image(clients[0], client, tag)
    return tag


def copy_image(source, target, tag: str) -> None:
    """`tag` from engine `source` to engine `target`, streamed (the image is never whole in memory here)."""
    stream = source.api.get_image(tag)  # an iterator over the tar of `docker save`
    for line in target.api.load_image(stream):  # `docker load`'s progress, read to the end so the load completes
        if isinstance(line, dict) and line.get("error"):
            raise RuntimeError(f"docker load of {tag} failed: {line['error']}")
    if not image_present(target, tag):
        raise RuntimeError(f"docker load did not produce {tag}")


def build_from_dockerfile(client, tag: str, log: Callable[[str], None]) -> None:
    import io

    log(f"building {tag} from the Dockerfile")
    client.images.build(fileobj=io.BytesIO(dockerfile_text().encode()), tag=tag, rm=True, forcerm=True,
                        labels={"rlvr.sandbox.recipe": tag})


def build_with_debootstrap(client, tag: str, log: Callable[[str], None]) -> None:
    """debootstrap a minbase rootfs with python3, trim it, and `docker import` it as `tag` (about a minute)."""
    if shutil.which("debootstrap") is None:
        raise RuntimeError("debootstrap is not installed: run `bash sandboxes/setup_docker.sh` or `apt-get install debootstrap`")
    if os.geteuid() != 0:
        raise RuntimeError("the offline image build (debootstrap) needs root")
    mirror = os.environ.get("RLVR_DEBIAN_MIRROR") or apt_mirror()
    with tempfile.TemporaryDirectory(prefix="rlvr-rootfs-", dir="/var/tmp") as tmp:
        rootfs = Path(tmp) / "rootfs"
        log(f"debootstrap {' '.join(DEBOOTSTRAP_ARGS)} {SUITE} from {mirror}")
        done = subprocess.run(["debootstrap", *DEBOOTSTRAP_ARGS, SUITE, str(rootfs), mirror],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"debootstrap failed ({done.returncode}):\n{done.stderr[-2000:] or done.stdout[-2000:]}")
        for part in TRIM:
            target = rootfs / part
            if target.is_dir():
                shutil.rmtree(target)
                target.mkdir()
        (rootfs / "sandbox").mkdir(exist_ok=True)
        log(f"importing {rootfs} as {tag}")
        tar = subprocess.Popen(["tar", "--numeric-owner", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        try:
            client.api.import_image_from_stream(tar.stdout, repository=tag.split(":")[0], tag=tag.split(":")[1],
                                                changes=["USER 65534:65534", "WORKDIR /sandbox"])
        finally:
            tar.stdout.close()
            tar.wait()
        if tar.returncode != 0:
            raise RuntimeError(f"tar of the rootfs failed ({tar.returncode})")
    if not image_present(client, tag):
        raise RuntimeError(f"docker import did not produce {tag}")


def apt_mirror() -> str:
    """The Debian mirror apt uses here (deb822 or one-line sources), else deb.debian.org."""
    candidates = [Path("/etc/apt/sources.list.d/debian.sources"), Path("/etc/apt/sources.list"),
                  *sorted(Path("/etc/apt/sources.list.d").glob("*.list"))]
    for path in candidates:
        try:
            text = path.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            words = line.split()
            if line.startswith("URIs:") and len(words) > 1 and "security" not in words[1]:
                return words[1]
            if words[:1] == ["deb"]:
                uri = next((w for w in words[1:] if "://" in w), None)
                if uri and "security" not in uri:
                    return uri
    return DEFAULT_MIRROR
