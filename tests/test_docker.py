"""docker/: the Dockerfile, the compose file and .dockerignore, checked without a Docker engine.

They must parse, copy files that exist and reach the build context, wire the cluster together,
and run the same job, with options it accepts, as `skewgroup run` / `spark-submit
skewgroup/app/job.py` do locally.
"""
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
DOCKERFILE = REPO / "docker" / "Dockerfile"
COMPOSE = REPO / "docker" / "compose.yaml"
DOCKERIGNORE = REPO / ".dockerignore"

INSTRUCTIONS = {"FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT",
                "VOLUME", "USER", "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK",
                "SHELL"}
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
SUBMIT_FLAGS = {"--verbose", "--supervise"}        # spark-submit options without a value


# --- a Dockerfile reader ---------------------------------------------------------------------


def dockerfile_instructions():
    """[(INSTRUCTION, arguments)] with continuation lines joined and comments dropped."""
    instructions, pending = [], ""
    for line in DOCKERFILE.read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("#") or (not stripped and not pending):
            continue          # comments, also inside a continued instruction, and parser directives
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        text = pending + stripped
        pending = ""
        keyword, _, arguments = text.partition(" ")
        instructions.append((keyword.upper(), arguments.strip()))
    assert not pending, "the Dockerfile ends inside a continued instruction"
    return instructions


def exec_form(arguments):
    """The JSON array of ``ENTRYPOINT ["a", "b"]``; None for the shell form."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return None
    return value if isinstance(value, list) else None


def copies():
    """(instruction, sources, destination) of every COPY/ADD from the build context."""
    found, workdir = [], "/"
    for keyword, arguments in dockerfile_instructions():
        if keyword == "WORKDIR":
            workdir = str(PurePosixPath(workdir, arguments))
        if keyword not in ("COPY", "ADD"):
            continue
        words = exec_form(arguments) or shlex.split(arguments)
        flags = [w for w in words if w.startswith("--")]
        paths = [w for w in words if not w.startswith("--")]
        if any(f.startswith("--from") for f in flags):
            continue          # from another stage or image, not from the context
        found.append((keyword, paths[:-1], str(PurePosixPath(workdir, paths[-1]))))
    return found


def pyproject():
    tomllib = pytest.importorskip("tomllib", reason="tomllib needs Python >= 3.11")
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def runs():
    return [arguments for keyword, arguments in dockerfile_instructions() if keyword == "RUN"]


def linked_paths():
    """{destination: python snippet} of the Dockerfile's ``ln -s "$(python -c '...')" DEST``."""
    pattern = re.compile(r"""ln -s "\$\(python -c '([^']+)'\)" (\S+)""")
    return {dest: code for text in runs() for code, dest in pattern.findall(text)}


# --- .dockerignore, with Docker's rules ------------------------------------------------------


def _pattern_regex(pattern):
    """Go's filepath.Match syntax plus ``**`` (any number of directories), as Docker uses."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        elif pattern[i] == "[":
            end = pattern.index("]", i + 1)
            out, i = out + pattern[i:end + 1], end + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out + r"\Z")


def dockerignore_rules():
    rules = []
    for line in DOCKERIGNORE.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        exception = line.startswith("!")
        pattern = str(PurePosixPath(line.lstrip("!").strip().lstrip("/")))
        rules.append((_pattern_regex(pattern), exception))
    return rules


def excluded(relative, rules):
    """Whether Docker leaves ``relative`` out of the context: the last rule matching the path
    or one of its parent directories decides."""
    parts = PurePosixPath(relative).parts
    candidates = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    verdict = False
    for regex, exception in rules:
        if any(regex.match(c) for c in candidates):
            verdict = not exception
    return verdict


def copied(relative):
    """Whether some COPY/ADD source is ``relative`` or one of its parent directories."""
    path = PurePosixPath(relative)
    for _, sources, _ in copies():
        for source in sources:
            source = PurePosixPath(source)
            if str(source) == "." or path == source or source in path.parents:
                return True
    return False


# --- compose ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compose():
    return yaml.safe_load(COMPOSE.read_text())


def argv_raw(service):
    return list(service.get("entrypoint") or []) + list(service.get("command") or [])


def argv(service):
    """The service's full command line: entrypoint then command, `sh -c` wrappers unfolded
    (compose turns ``$$`` into ``$``)."""
    words = argv_raw(service)
    if words[:2] == ["sh", "-c"]:
        script = shlex.split(words[2].replace("$$", "$"))
        if script[0] == "exec":
            script = script[1:]
        assert script[-1] == "$@", f"the sh -c wrapper must pass its arguments on: {words[2]!r}"
        words = script[:-1] + words[4:]          # words[3] is the script's $0
    return words


def split_submit(words):
    """spark-submit's argv -> (its options as {name: value}, the script, the script's args)."""
    options, i = {}, 1
    while i < len(words) and words[i].startswith("--"):
        if words[i] in SUBMIT_FLAGS or "=" in words[i]:
            options[words[i]] = True
            i += 1
        else:
            options.setdefault(words[i], []).append(words[i + 1])
            i += 2
    return options, words[i], words[i + 1:]


def option(words, name):
    return words[words.index(name) + 1]


def workers(compose):
    return {name: s for name, s in compose["services"].items() if WORKER_CLASS in argv(s)}


def master_url(compose):
    master = next(s for s in compose["services"].values() if MASTER_CLASS in argv(s))
    words = argv(master)
    return f"spark://{option(words, '--host')}:{option(words, '--port')}"


def job_service(compose):
    return compose["services"]["job"]


def mounts(service):
    """{container path: volume name} of the service's named volumes."""
    found = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        found[target] = source
    return found


# --- the Dockerfile --------------------------------------------------------------------------


def test_dockerfile_parses_into_known_instructions():
    instructions = dockerfile_instructions()
    unknown = [k for k, _ in instructions if k not in INSTRUCTIONS]
    assert not unknown, f"unknown Dockerfile instructions {unknown}"
    first = next((k, a) for k, a in instructions if k != "ARG")
    assert first[0] == "FROM"
    # Debian-based slim Python that still ships openjdk-17 (trixie does not).
    assert first[1].startswith("python:3.11-slim-bookworm"), first[1]


def test_dockerfile_installs_java_compiler_and_the_package_with_spark():
    apt = [shlex.split(text) for text in runs() if "apt-get install" in text]
    packages = {word for words in apt for word in words}
    assert {"openjdk-17-jre-headless", "build-essential"} <= packages, packages
    # pip install ".[spark]" runs in the directory pyproject.toml was copied into.
    pip = [workdir for text, workdir in _runs_with_workdir()
           if "pip install" in text and ".[spark]" in shlex.split(text)]
    assert pip, 'no RUN pip install ".[spark]"'
    pyproject_dirs = {dest for _, sources, dest in copies() if "pyproject.toml" in sources}
    assert set(pip) <= pyproject_dirs, (pip, pyproject_dirs)


def _runs_with_workdir():
    workdir, found = "/", []
    for keyword, arguments in dockerfile_instructions():
        if keyword == "WORKDIR":
            workdir = str(PurePosixPath(workdir, arguments))
        elif keyword == "RUN":
            found.append((arguments, workdir))
    return found


def test_entry_point_is_skewgroup_run():
    entrypoints = [exec_form(a) for k, a in dockerfile_instructions() if k == "ENTRYPOINT"]
    assert entrypoints[-1] == ["skewgroup", "run"]
    scripts = pyproject()["project"]["scripts"]
    assert scripts["skewgroup"] == "skewgroup.app.cli:main"


def test_skewgroup_run_reaches_the_jobs_parser(capsys):
    from skewgroup.app import cli

    with pytest.raises(SystemExit) as exit:
        cli.main(["run", "--help"])
    assert exit.value.code == 0
    assert capsys.readouterr().out.startswith("usage: skewgroup run")


def test_copy_sources_exist_and_reach_the_build_context():
    rules = dockerignore_rules()
    assert not (REPO / "docker" / "Dockerfile.dockerignore").exists(), \
        "docker/Dockerfile.dockerignore would replace the root .dockerignore"
    assert copies(), "the Dockerfile copies nothing from the context"
    for keyword, sources, _ in copies():
        for source in sources:
            matches = list(REPO.glob(source)) if any(c in source for c in "*?[") else \
                [REPO / source]
            assert matches and all(m.exists() for m in matches), \
                f"{keyword} {source}: no such file in {REPO}"
            for match in matches:
                relative = match.relative_to(REPO).as_posix()
                assert relative == "." or not excluded(relative, rules), \
                    f"{keyword} {source}: .dockerignore leaves it out of the build context"


def test_build_inputs_are_copied_and_host_builds_are_not():
    rules = dockerignore_rules()
    project = pyproject()["project"]
    needed = ["pyproject.toml", "setup.py", project["readme"]]
    needed += [p.relative_to(REPO).as_posix() for pattern in ("*.pyx", "*.pxd", "*.h")
               for p in (REPO / "csrc").rglob(pattern)]
    needed += [p.relative_to(REPO).as_posix() for p in (REPO / "skewgroup").rglob("*.py")]
    missing = [p for p in needed if not copied(p) or excluded(p, rules)]
    assert not missing, f"the image build would not see {missing}"
    # Compiled modules and build trees of the host are for another platform/Python.
    for foreign in ("skewgroup/_routing/_hash.cpython-311-x86_64-linux-gnu.so",
                    "skewgroup/spark/__pycache__/job.cpython-311.pyc",
                    "csrc/skewgroup/_routing/_hash.c", "build/lib/skewgroup/_routing/_hash.so",
                    ".git/HEAD", ".venv/bin/python",
                    "skewgroup.egg-info/PKG-INFO"):
        assert excluded(foreign, rules), f".dockerignore lets {foreign} into the context"


def test_dockerignore_rules_follow_docker():
    rules = [(_pattern_regex(p), False) for p in ("**/*.so", "build", "csrc/*/*.c")]
    rules.append((_pattern_regex("build/keep"), True))
    assert excluded("a.so", rules) and excluded("x/y/a.so", rules)
    assert excluded("build/lib/x.py", rules) and not excluded("build/keep", rules)
    assert excluded("csrc/skewgroup/_hash.c", rules)
    assert not excluded("csrc/vendor/xxhash/xxhash.h", rules)
    assert not excluded("skewgroup/build.py", rules)


def test_fixed_paths_resolve_to_spark_home_and_the_job_script(tmp_path):
    pytest.importorskip("pyspark")
    links = linked_paths()
    assert set(links) >= {"/opt/spark", "/opt/skewgroup/job.py"}, links
    resolved = {}
    for dest, code in links.items():
        # Run outside the checkout, as in the image, where only the installed package exists.
        done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                              text=True)
        assert done.returncode == 0, f"{dest}: {code!r} fails:\n{done.stderr}"
        resolved[dest] = Path(done.stdout.strip())
    spark_home = resolved["/opt/spark"]
    assert (spark_home / "bin" / "spark-class").is_file()
    assert (spark_home / "bin" / "spark-submit").is_file()
    job = resolved["/opt/skewgroup/job.py"]
    assert job.parts[-3:] == ("skewgroup", "app", "job.py") and job.is_file()
    assert (REPO / "skewgroup" / "app" / "job.py").is_file()
    env = dict(a.split("=", 1) for k, text in dockerfile_instructions() if k == "ENV"
               for a in shlex.split(text))
    assert env["SPARK_HOME"] == "/opt/spark"


# --- the compose file ------------------------------------------------------------------------


def test_compose_services_build_and_share_the_image(compose):
    services = compose["services"]
    assert {"spark-master", "spark-worker-1", "spark-worker-2", "job"} <= set(services)
    images = {s.get("image") for s in services.values()}
    assert len(images) == 1 and None not in images, images
    for name, service in services.items():
        build = service["build"]
        context = (COMPOSE.parent / build["context"]).resolve()
        assert context == REPO, f"{name}: build context {context}, not the repository root"
        assert (context / build["dockerfile"]).resolve() == DOCKERFILE
        for other in service.get("depends_on", []):
            assert other in services, f"{name} depends on an unknown service {other!r}"
        for volume in mounts(service).values():
            assert volume in (compose.get("volumes") or {}), f"{name}: undeclared {volume}"


def test_compose_dollars_are_escaped(compose):
    # Compose substitutes $NAME and ${NAME} from the host; a shell's $ must be written $$.
    for name, service in compose["services"].items():
        for word in argv_raw(service):
            assert not re.search(r"\$(?!\$)", word.replace("$$", "")), \
                f"{name}: unescaped $ in {word!r}"


def test_compose_wires_master_workers_and_job(compose):
    url = master_url(compose)
    found = workers(compose)
    assert len(found) == 2, sorted(found)
    for name, worker in found.items():
        words = argv(worker)
        assert words[0] == "/opt/spark/bin/spark-class"
        assert words[words.index(WORKER_CLASS) + 1] == url, name
    master = compose["services"]["spark-master"]
    assert argv(master)[0] == "/opt/spark/bin/spark-class"
    # The master is healthy once every worker has registered; the job waits for that.
    wanted = re.search(r"aliveworkers'\]\s*>=\s*(\d+)", " ".join(master["healthcheck"]["test"]))
    assert wanted and int(wanted.group(1)) == len(found)
    assert job_service(compose)["depends_on"]["spark-master"]["condition"] == "service_healthy"
    words = argv(job_service(compose))
    assert words[0] == "/opt/spark/bin/spark-submit"
    options, _, _ = split_submit(words)
    assert options["--master"] == [url]


def test_compose_job_runs_the_local_jobs_script(compose):
    _, script, _ = split_submit(argv(job_service(compose)))
    # The Dockerfile links this path to the installed skewgroup/app/job.py (see the test above).
    assert script == "/opt/skewgroup/job.py"
    assert "skewgroup.app.job" in linked_paths()[script]


def test_compose_job_options_are_accepted_by_the_job(compose, capsys):
    from skewgroup.app.options import job_parser

    _, _, job_args = split_submit(argv(job_service(compose)))
    try:
        args = job_parser().parse_args(job_args)
    except SystemExit:
        pytest.fail(f"the job's parser refuses {job_args}:\n{capsys.readouterr().err}")
    assert args.sink == "parquet"
    # Executors write the output and the streaming state: every worker and the driver must see
    # the same directory, i.e. the same named volume at the same place.
    job_mounts = mounts(job_service(compose))
    for path in (args.output, args.checkpoint):
        assert path, "the compose job needs --output and --checkpoint"
        target = next((t for t in job_mounts if PurePosixPath(path).is_relative_to(t)), None)
        assert target, f"{path} is on no volume of the job"
        for name, worker in workers(compose).items():
            assert mounts(worker).get(target) == job_mounts[target], \
                f"{name} does not mount volume {job_mounts[target]!r} at {target}"
