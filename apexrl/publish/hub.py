"""Uploading a `Plan` to the Hub with huggingface_hub: resumable, retried, verified.

1. create the repo (exist_ok; private unless --public) and the branch when it is not
   main; a private publish into an existing public repo is refused;
2. list the remote tree: files already there with the same content are skipped
   (a rerun after an interruption sends only what is missing);
3. upload the rest in a few large commits (LFS objects first, through
   `preupload_lfs_files`: objects the Hub already holds, e.g. from a commit that
   failed after its upload, are not sent again); the card goes in the last commit;
4. list the remote tree again and compare every file's size and content id.

429 and 5xx answers and network errors are retried with exponential backoff
(honouring Retry-After); other 4xx are not (docs/facts.md section 9): they stop with
the Hub's message and what to do. A missing or rejected token exits 3.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from apexrl.errors import ApexError, AuthError, ExitCode, RemoteError
from apexrl.publish.models import PublishResult
from apexrl.publish.stage import Plan, PlanFile

RETRIES = 6
BACKOFF_S = 2.0  # first wait; doubles each attempt
BACKOFF_MAX_S = 60.0
COMMIT_BYTES = 20 * 1024**3  # few large commits (the Hub allows ~128 commits/hour)
COMMIT_FILES = 2_000
COMMITS_PER_HOUR = 128  # docs/facts.md section 9
TIMEOUT = {"connect": 30.0, "read": 300.0, "write": 300.0, "pool": 60.0}


def get_token() -> str:
    """The Hub token: HF_TOKEN / HUGGING_FACE_HUB_TOKEN, else the one `hf auth login` saved."""
    for key in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        if os.environ.get(key):
            return os.environ[key]
    try:
        from huggingface_hub import get_token as hf_get_token

        tok = hf_get_token()
    except Exception:  # a broken token file is the same as none
        tok = None
    if not tok:
        raise AuthError(
            "no Hugging Face token: set HF_TOKEN (or run `hf auth login`)",
            hint="create a token with write access at https://huggingface.co/settings/tokens; "
            "--dry-run works without one",
        )
    return tok


def _install_timeouts() -> None:
    """huggingface_hub's shared HTTP client has no timeout by default: give it one."""
    try:
        import httpx2  # the HTTP client huggingface_hub >= 1.x ships with
        from huggingface_hub.utils._http import hf_request_event_hook, set_client_factory
    except ImportError:  # older clients set their own timeouts per call
        return

    def factory():
        return httpx2.Client(
            event_hooks={"request": [hf_request_event_hook]},
            follow_redirects=True,
            timeout=httpx2.Timeout(**TIMEOUT),
        )

    set_client_factory(factory)


def _causes(e: BaseException) -> Iterator[BaseException]:
    """`e`, then what it was raised from or while handling, and so on (each once)."""
    seen = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        yield cur
        cur = cur.__cause__ or cur.__context__


def _http_status(e: BaseException) -> tuple[int | None, str, str | None, bool]:
    """(status, Hub message, Retry-After, is_transport_error) found along the cause chain."""
    for cur in _causes(e):
        resp = getattr(cur, "response", None)
        status = getattr(resp, "status_code", None)
        if isinstance(status, int):
            msg = getattr(cur, "server_message", None) or ""
            if not msg:
                try:
                    msg = resp.headers.get("X-Error-Message") or resp.json().get("error") or ""
                except Exception:
                    msg = ""
            return status, str(msg).strip(), resp.headers.get("Retry-After"), False
        name = type(cur).__name__
        mod = type(cur).__module__ or ""
        transport = mod.startswith(("httpx", "httpcore")) and (
            "Timeout" in name or "Connect" in name or "Protocol" in name or "Network" in name
            or "Read" in name or "Write" in name or "Transport" in name
        )  # fmt: skip
        if transport or isinstance(cur, ConnectionError | TimeoutError):
            return None, f"{name}: {cur}", None, True
    return None, "", None, False


def _dns_failure(e: BaseException) -> str | None:
    """ "no such name", "resolver failed" (maybe transient: one retry), or None."""
    import socket

    for cur in _causes(e):
        text = str(cur)
        if "Name or service not known" in text or "nodename nor servname" in text:
            return "no such name"
        if isinstance(cur, socket.gaierror) or "name resolution" in text:
            return "resolver failed"
    return None


def _hint(status: int) -> str:
    return {
        400: "the Hub refused the request as malformed; check the repo name and file paths",
        404: "check the repo id and --revision; a private repo needs a token that can see it",
        409: "another operation is running on this repo; rerun when it has finished",
        412: "the branch moved during the upload; rerun (finished files are not sent again)",
        413: "a file is too large for the Hub; split it into smaller shards",
    }.get(status, "fix what the Hub's message says and rerun")


def warn_stderr(message: str) -> None:
    """The default warning sink when no caller passes `on_warn` (the CLI passes its own)."""
    print(f"warning: {message}", file=sys.stderr)


def with_retries(what: str, fn: Callable, *, sleep=time.sleep, on_warn=warn_stderr):
    """Run `fn()`; retry 429/5xx/network errors with backoff; classify the rest."""
    for attempt in range(1, RETRIES + 1):
        try:
            return fn()
        except ApexError:
            raise
        except Exception as e:
            status, msg, retry_after, transport = _http_status(e)
            if status is None and not transport:
                if isinstance(e, ValueError):  # the client's word for a refused or malformed answer
                    raise RemoteError(f"{what}: {e}", retryable=False) from None
                raise
            label = f"HTTP {status}" if status else "network error"
            if status in (401, 403):
                raise AuthError(
                    f"{what}: the Hub refused the token ({status}): {msg or 'no message'}",
                    hint="use a token with write access to this namespace "
                    "(https://huggingface.co/settings/tokens) in HF_TOKEN",
                ) from None
            dns = _dns_failure(e) if transport else None
            if dns == "no such name" or (dns and attempt >= 2):  # retrying for minutes
                raise RemoteError(  # will not make the name resolve
                    f"{what}: cannot resolve the Hub's host name ({msg})",
                    retryable=False,
                    hint="check the network and HF_ENDPOINT (the Hub address), then rerun",
                ) from None
            if transport or status == 429 or status >= 500:
                if attempt == RETRIES:
                    raise RemoteError(
                        f"{what}: {label} after {RETRIES} attempts: {msg}",
                        retryable=True,
                        hint="rerun the same command later: uploaded files are not sent again",
                    ) from None
                wait = min(BACKOFF_S * 2 ** (attempt - 1), BACKOFF_MAX_S)
                if retry_after and retry_after.isdigit():
                    wait = min(float(retry_after), BACKOFF_MAX_S)
                on_warn(f"{what}: {label} ({msg}); retrying in {wait:g}s ({attempt}/{RETRIES - 1})")
                sleep(wait)
                continue
            raise RemoteError(
                f"{what}: the Hub answered {status}: {msg or 'no message'}",
                retryable=False,
                hint=_hint(status),
            ) from None
    raise AssertionError("unreachable")


def git_blob_oid(path: Path) -> str:
    h = hashlib.sha1()
    h.update(b"blob %d\0" % path.stat().st_size)
    with open(path, "rb") as fh:
        while chunk := fh.read(8 * 1024 * 1024):
            h.update(chunk)
    return h.hexdigest()


def _same(f: PlanFile, remote) -> bool:
    if remote is None or getattr(remote, "size", None) != f.size:
        return False
    lfs = getattr(remote, "lfs", None)
    if lfs is not None:
        return lfs.sha256 == f.sha256
    return remote.blob_id == git_blob_oid(f.local)


def _remote_files(api, plan: Plan, on_warn=warn_stderr) -> dict:
    from huggingface_hub.errors import EntryNotFoundError, RevisionNotFoundError

    def listing():
        try:
            items = api.list_repo_tree(
                plan.repo, recursive=True, revision=plan.revision, repo_type=plan.repo_type
            )
            return {i.path: i for i in items if hasattr(i, "blob_id")}
        except (EntryNotFoundError, RevisionNotFoundError):
            return {}

    return with_retries(f"list files of {plan.repo}", listing, on_warn=on_warn)


def commit_groups(files: list[PlanFile], max_bytes: int, max_files: int) -> list[list[PlanFile]]:
    """Split into commits; README.md (the card) goes last, alone at the end of the last one."""
    body = [f for f in files if f.path != "README.md"]
    card = [f for f in files if f.path == "README.md"]
    groups: list[list[PlanFile]] = [[]]
    size = 0
    for f in body:
        if groups[-1] and (size + f.size > max_bytes or len(groups[-1]) >= max_files):
            groups.append([])
            size = 0
        groups[-1].append(f)
        size += f.size
    if card:
        groups[-1].extend(card)
    return [g for g in groups if g]


def _operation(cls, f: PlanFile):
    """A CommitOperationAdd that reuses the plan's sha256 (the client would hash again)."""
    op = cls(path_in_repo=f.path, path_or_fileobj=str(f.local))
    info = op.upload_info
    if getattr(info, "is_hashed", True) is False:
        with contextlib.suppress(AttributeError):  # a client without the setter hashes itself
            info.sha256 = bytes.fromhex(f.sha256)
    return op


def upload(
    plan: Plan,
    *,
    token: str,
    commit_bytes: int = COMMIT_BYTES,
    commit_files: int = COMMIT_FILES,
    on_progress: Callable[[int], None] | None = None,
    on_warn: Callable[[str], None] = warn_stderr,
) -> tuple[PublishResult, list]:
    """Upload `plan`; return the result and the per-file records (status set)."""
    from huggingface_hub import CommitOperationAdd, HfApi
    from huggingface_hub.utils import disable_progress_bars

    retry = functools.partial(with_retries, on_warn=on_warn)
    _install_timeouts()
    disable_progress_bars()  # ours is on stderr already
    endpoint = os.environ.get("HF_ENDPOINT") or None
    api = HfApi(endpoint=endpoint, token=token)
    repo_url = retry(
        f"create {plan.repo_type} repo {plan.repo}",
        lambda: api.create_repo(
            plan.repo, repo_type=plan.repo_type, private=plan.private, exist_ok=True
        ),
    )
    info = retry(f"read {plan.repo}", lambda: api.repo_info(plan.repo, repo_type=plan.repo_type))
    if plan.private and getattr(info, "private", None) is False:
        raise ApexError(
            f"{plan.repo} already exists and is public; this publish is private",
            hint="pass --public to publish into a public repo, or choose another --repo",
            code=ExitCode.CHECK_FAILED,
        )
    if plan.revision != "main":
        retry(
            f"create branch {plan.revision}",
            lambda: api.create_branch(
                plan.repo, branch=plan.revision, repo_type=plan.repo_type, exist_ok=True
            ),
        )
    remote = _remote_files(api, plan, on_warn)
    todo = [f for f in plan.files if not _same(f, remote.get(f.path))]
    done_paths = {f.path for f in plan.files} - {f.path for f in todo}
    if on_progress:
        on_progress(sum(f.size for f in plan.files if f.path in done_paths))
    groups = commit_groups(todo, commit_bytes, commit_files)
    if len(groups) > COMMITS_PER_HOUR // 2:
        on_warn(
            f"{len(groups)} commits: the Hub allows about {COMMITS_PER_HOUR} per hour "
            "(429 answers are retried, but a larger --commit-size is faster)"
        )
    commit = None
    for k, group in enumerate(groups, 1):
        ops = [_operation(CommitOperationAdd, f) for f in group]
        what = f"upload to {plan.repo} (commit {k}/{len(groups)})"
        retry(
            what,
            lambda ops=ops: api.preupload_lfs_files(
                plan.repo,
                additions=ops,
                repo_type=plan.repo_type,
                revision=plan.revision,
                free_memory=False,
            ),
        )
        info = retry(
            what,
            lambda ops=ops, k=k: api.create_commit(
                plan.repo,
                operations=ops,
                commit_message=f"apexrl publish ({k}/{len(groups)})",
                repo_type=plan.repo_type,
                revision=plan.revision,
            ),
        )
        commit = info.oid
        if on_progress:
            on_progress(sum(f.size for f in group))
    records = verify(api, plan, uploaded={f.path for f in todo})
    if commit is None:
        info = retry(
            f"read {plan.repo}",
            lambda: api.repo_info(plan.repo, repo_type=plan.repo_type, revision=plan.revision),
        )
        commit = info.sha
    result = PublishResult(
        repo=plan.repo,
        repo_type=plan.repo_type,
        revision=plan.revision,
        private=plan.private,
        url=str(repo_url),
        commit=commit,
        n_files=len(plan.files),
        size_bytes=plan.size_bytes,
        uploaded=len(todo),
        unchanged=len(done_paths),
        commits=len(groups),
        redactions=plan.redactor.total,
    )
    return result, records


def verify(api, plan: Plan, *, uploaded: set[str]) -> list:
    """Every planned file is on the Hub with its size and content id; else exit 4.

    Returns the file records, status `uploaded` (sent now) or `unchanged` (already there)."""
    remote = _remote_files(api, plan)
    bad = []
    for f in plan.files:
        r = remote.get(f.path)
        if r is None:
            bad.append(f"{f.path}: missing on the Hub")
        elif not _same(f, r):
            bad.append(
                f"{f.path}: the Hub has {r.size} bytes / another content, local {f.size} bytes"
            )
    if bad:
        lines = "\n".join(f"  - {b}" for b in bad[:20])
        raise ApexError(
            f"verification of {plan.repo}@{plan.revision} failed ({len(bad)} file(s)):\n{lines}",
            hint="rerun the same command: it uploads what is missing or different",
            code=ExitCode.REMOTE,
        )
    records = plan.records("verified")
    for r in records:
        r.status = "uploaded" if r.path in uploaded else "unchanged"
    return records


__all__ = ["upload", "verify", "with_retries", "get_token", "commit_groups"]
