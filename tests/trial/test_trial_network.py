"""The network of a trial's agent in apexrl's own runs (issue 42, finding 2).

apexrl grades on the host, so a task's `[environment] network_mode = "public"` (there for
an in-sandbox grader: `--grader-from ... --grader-network public`, the recipe's tasks)
does not put the agent's code online in `trial run` / `eval run`: only the task's own
`[agent]` table does. An online agent's exec has a network namespace of its own and one
way out, the egress proxy (apexrl.envs.local.egress), which connects to public addresses
only: the host's loopback, its other addresses (its listening ports) and the link-local
metadata address stay out of reach, directly and through the proxy. Real bubblewrap
trials with a scripted agent whose commands list its network interfaces and connect.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import socket
import threading
from pathlib import Path

import pytest

from apexrl.trial.config import TrialConfig
from apexrl.trial.run import arun_trial
from tests.trial.conftest import task_named

pytestmark = pytest.mark.integration


class Listener:
    """A TCP listener on the host's 127.0.0.1 that counts connections."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.sock = socket.socket()
        self.sock.bind((host, 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.hits = 0
        self.stop = False
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self) -> None:
        while not self.stop:
            try:
                c, _ = self.sock.accept()
            except OSError:
                continue
            self.hits += 1
            c.close()

    def close(self) -> None:
        self.stop = True
        self.t.join(timeout=2)
        self.sock.close()


def set_network(task: Path, table: str) -> None:
    """`network_mode = "public"` in the task's [environment] or [agent] table."""
    from harbor.models.task.config import NetworkMode, TaskConfig

    cfg = TaskConfig.model_validate_toml((task / "task.toml").read_text())
    getattr(cfg, table).network_mode = NetworkMode.PUBLIC
    (task / "task.toml").write_text(cfg.model_dump_toml())


def host_address() -> str:
    """The host's own non-loopback address (where services on 0.0.0.0 listen too)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        u.connect(("192.0.2.1", 9))  # no packet is sent: only the route is chosen
        return u.getsockname()[0]


def tcp(host: str, port: int) -> str:
    return f"(exec 3<>/dev/tcp/{host}/{port}) 2>/dev/null && echo reached || echo refused"


# through the proxy the variables name: CONNECT to a host address is refused with 403
VIA_PROXY = (
    'python3 -c \'import os,socket,urllib.parse as u; p=u.urlsplit(os.environ["HTTPS_PROXY"]);'
    " s=socket.create_connection((p.hostname,p.port),5);"
    ' s.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\\r\\n\\r\\n");'
    " print(s.recv(64).split()[1].decode())'"
)


def probe(task: Path, worlds: Path, logs: Path, port: int, lan_port: int) -> dict:
    from harbor.models.trial.config import AgentConfig

    commands = [
        "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\n' ' '",
        tcp("127.0.0.1", port),
        tcp(host_address(), lan_port),
        f"timeout 5 bash -c '{tcp('169.254.169.254', 80)}' || echo refused",
        f'[ -n "${{HTTPS_PROXY:-}}" ] && {VIA_PROXY % port} || echo no-proxy',
    ]
    agent = AgentConfig(
        import_path="tests.trial.agents:ScriptAgent",
        kwargs={"answer": "no idea", "commands": commands},
    )
    cfg = TrialConfig(agent="oracle", worlds_dir=worlds, logs_dir=logs)
    out = asyncio.run(arun_trial(task, cfg, agent_config=agent))
    assert out.result.status == "complete", out.error_message
    ran = json.loads((logs / "agent" / "exec.json").read_text())
    names = ("loopback", "host_address", "link_local", "proxy_to_loopback")
    seen = {n: r["out"].strip().splitlines()[-1] for n, r in zip(names, ran[1:], strict=True)}
    return {"interfaces": ran[0]["out"].split(), **seen}


def probe_with_listeners(task: Path, worlds: Path, logs: Path) -> tuple[dict, int]:
    loop, lan = Listener(), Listener("0.0.0.0")
    try:
        seen = probe(task, worlds, logs, loop.port, lan.port)
    finally:
        loop.close()
        lan.close()
    return seen, loop.hits + lan.hits


def test_a_public_environment_does_not_put_the_agent_online_in_apexrl_runs(
    tmp_path, worlds, task_dirs, task_copy
):
    task = task_copy(task_named(task_dirs, "steerco-40fc"))
    set_network(task, "environment")
    seen, hits = probe_with_listeners(task, worlds, tmp_path / "env-public")
    assert seen == {
        "interfaces": ["lo"],
        "loopback": "refused",
        "host_address": "refused",
        "link_local": "refused",
        "proxy_to_loopback": "no-proxy",
    }, seen
    assert hits == 0


def test_an_online_agent_reaches_no_host_service(tmp_path, worlds, task_dirs, task_copy):
    """The task's own [agent] table asks for network: the agent gets the egress proxy,
    and still nothing of the host."""
    task = task_copy(task_named(task_dirs, "steerco-40fc"))
    set_network(task, "agent")
    seen, hits = probe_with_listeners(task, worlds, tmp_path / "agent-public")
    assert seen == {
        "interfaces": ["lo"],
        "loopback": "refused",
        "host_address": "refused",
        "link_local": "refused",
        "proxy_to_loopback": "403",
    }, seen
    assert hits == 0


def test_the_egress_proxy_forwards_to_allowed_addresses_only(tmp_path):
    """The proxy itself: a CONNECT to an allowed address is spliced through; loopback,
    private, link-local, CGNAT and mapped addresses are refused by the default rule."""
    from apexrl.envs.local.egress import EgressProxy, allowed

    for ip in (
        "127.0.0.1",
        "10.1.2.3",
        "192.168.0.1",
        "172.16.0.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "::1",
        "fe80::1",
        "::ffff:127.0.0.1",
        "224.0.0.1",
    ):
        assert not allowed(ip), ip
    assert allowed("8.8.8.8") and allowed("2606:4700:4700::1111")
    echo = socket.socket()
    echo.bind(("127.0.0.1", 0))
    echo.listen(1)

    def serve() -> None:
        c, _ = echo.accept()
        with c:
            c.sendall(c.recv(64).upper())

    threading.Thread(target=serve, daemon=True).start()
    port = echo.getsockname()[1]
    for allow, expect in ((allowed, b"403"), (lambda ip: True, b"200")):
        proxy = EgressProxy(tmp_path / f"e{expect.decode()}.sock", allow=allow)
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(str(proxy.path))
                s.sendall(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
                head = s.recv(4096)
                assert head.split()[1] == expect, head
                if expect == b"200":
                    s.sendall(b"ping")
                    assert s.recv(64) == b"PING"
        finally:
            proxy.close()
    echo.close()


@pytest.mark.parametrize("forkserver", ["1", "0"], ids=["forked-gateway", "fresh-gateway"])
def test_an_online_agents_code_tool_reaches_no_host_service(
    tmp_path, worlds, task_dirs, task_copy, monkeypatch, forkserver
):
    """The gateway has the host's network (to be reachable); an online agent's code-tool
    commands do not share it: their own namespace, the egress proxy their way out."""
    from harbor.models.task.config import NetworkPolicy

    from apexrl.agent.mcp_tools import ToolBox
    from tests.trial.test_local_env import make_env

    monkeypatch.setenv("APEXRL_LOCAL_FORKSERVER", forkserver)
    task = task_copy(task_named(task_dirs, "steerco-40fc"))
    set_network(task, "agent")
    loop, lan = Listener(), Listener("0.0.0.0")
    lines = [
        "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\n' ' '; echo",
        tcp("127.0.0.1", loop.port),
        tcp(host_address(), lan.port),
        f"timeout 5 bash -c '{tcp('169.254.169.254', 80)}' || echo refused",
        f'[ -n "${{HTTPS_PROXY:-}}" ] && {VIA_PROXY % loop.port} || echo no-proxy',
    ]
    env = make_env(
        task,
        tmp_path / "trial",
        worlds,
        network_policy=NetworkPolicy(network_mode="public"),
        agent_network="explicit",
    )

    async def go():
        await env.start(force_build=False)
        try:
            box = ToolBox(env.gateway_url)
            await box.connect()
            try:
                name = next(n for n in box.names if n.startswith("code"))
                arg = "code" if name == "code_execution_code_exec" else "command"
                outs = []
                for c in lines:
                    res = await box.call(name, {arg: f"bash -c {shlex.quote(c)}"}, timeout_s=30)
                    outs.append(json.loads(res.text)["output"])
                return outs
            finally:
                await box.close()
        finally:
            await env.stop(delete=True)

    try:
        out = asyncio.run(go())
    finally:
        loop.close()
        lan.close()
    assert out[0].split() == ["lo"], out[0]
    for text in out[1:4]:
        assert "refused" in text and "reached" not in text, out
    assert "403" in out[4], out[4]
    assert loop.hits + lan.hits == 0
