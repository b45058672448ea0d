"""ActiveMQ Classic: a private instance (own conf/data dirs, STOMP on a loopback port), here or in an image
(whose instance template is copied out of it first).

A private instance also listens for OpenWire on a second loopback port (``extra["openwire"]`` of its
endpoint): ActiveMQ's own producer/consumer tool, which ``mqbench crosscheck`` runs, speaks only OpenWire.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from urllib.parse import unquote, urlsplit

from harness.brokers._base import ProbeError, Provisioner, host_port, which
from harness.brokers._ports import LOOPBACK
from harness.brokers._spec import Command, PinnedImage
from harness.brokers._wire import connect, recv_until

IMAGE = "apache/activemq-classic:5.18.6"
HOME = Path(os.environ.get("ACTIVEMQ_HOME", "/usr/share/activemq"))
# Debian keeps the instance template under /etc; an upstream tarball keeps it in $ACTIVEMQ_HOME/conf.
CONF_TEMPLATES = (Path("/etc/activemq/instances-available/main"), HOME / "conf")
# Debian's ActiveMQ logs through log4j 1.2; without this its console (our log file) stays silent.
LOG4J = (
    "log4j.rootLogger=INFO, console\n"
    "log4j.logger.org.springframework=WARN\n"
    "log4j.logger.org.apache.xbean=WARN\n"
    "log4j.appender.console=org.apache.log4j.ConsoleAppender\n"
    "log4j.appender.console.layout=org.apache.log4j.PatternLayout\n"
    "log4j.appender.console.layout.ConversionPattern=%d | %-5p | %m | %c | %t%n\n"
)
CONNECTORS = re.compile(r"<transportConnectors>.*?</transportConnectors>", re.S)


class ActiveMQProvisioner(Provisioner):
    cluster_note = "ActiveMQ Classic's shared-store master/slave is not run by mqbench yet"
    system = "activemq"
    depth_note = "queue depth needs JMX; sent - received stands in"
    schemes = ("stomp",)
    install_hint = "install the Debian package activemq and a Java runtime (`make brokers`)"
    url_template = "stomp://{host}:{port}"
    image = PinnedImage(IMAGE, {"binary": "/opt/apache-activemq/bin/activemq.jar", "java": "java",
                                "home": "/opt/apache-activemq", "conf": "/opt/apache-activemq/conf"})
    ports = 2  # STOMP (the clients'), OpenWire (ActiveMQ's own benchmark tool)
    ready_timeout = 90.0
    stop_grace = 15.0

    def find_binary(self) -> str | None:
        """The broker's jar, when a Java runtime and an instance template are there too."""
        jar = HOME / "bin" / "activemq.jar"
        if not jar.is_file() or which("java") is None or _conf_template() is None:
            return None
        return str(jar)

    def commands(self, jar: str, workdir: Path, ports: list[int]) -> tuple[Command, ...]:
        java = self.path("java", lambda: which("java"))
        home = self.path("home", lambda: str(HOME))
        conf, data = workdir / "conf", workdir / "data"
        template = _conf_template() if self.files is None else None
        if java is None or (self.files is None and template is None):  # gone since find_binary looked
            raise OSError(self.process_unavailable_reason())
        if self.files is not None:
            assert self.files.copy_out is not None, "an image's instance template is copied out of it"
            self.files.copy_out(self.files.paths["conf"], conf)
        else:
            assert template is not None
            shutil.copytree(template, conf)
        (data / "tmp").mkdir(parents=True)
        xml = conf / "activemq.xml"
        xml.write_text(broker_xml(xml.read_text(), ports[0], ports[1]))
        (conf / "log4j.properties").write_text(LOG4J)
        argv = (
            java,
            "-Xmx512m",
            "-Djava.awt.headless=true",
            f"-Dlog4j.configuration=file:{conf / 'log4j.properties'}",
            f"-Dactivemq.home={home}",
            f"-Dactivemq.base={workdir}",
            f"-Dactivemq.conf={conf}",
            f"-Dactivemq.data={data}",
            f"-Djava.io.tmpdir={data / 'tmp'}",
            "-jar",
            jar,
            "start",
            f"xbean:file:{xml}",
        )
        return (Command("activemq", argv),)

    def launch_extra(self, ports: list[int]) -> dict[str, str]:
        return {"openwire": f"tcp://{LOOPBACK}:{ports[1]}"}

    def probe(self, url: str, timeout: float) -> str:
        """STOMP CONNECT; ready on CONNECTED, whose ``server`` header carries the version."""
        host, port = host_port(url, 61613)
        parts = urlsplit(url)
        headers = "accept-version:1.1,1.2\nhost:localhost\nheart-beat:0,0\n"
        if parts.username is not None:
            headers += f"login:{unquote(parts.username)}\npasscode:{unquote(parts.password or '')}\n"
        with connect(host, port, timeout) as sock:
            sock.sendall(f"CONNECT\n{headers}\n\x00".encode())
            frame = recv_until(sock, b"\x00").decode(errors="replace").lstrip("\r\n")
            if not frame.startswith("CONNECTED"):
                raise ProbeError(f"STOMP answered {frame.splitlines()[0] if frame else 'nothing'!r}")
            sock.sendall(b"DISCONNECT\n\n\x00")
        match = re.search(r"^server:\s*\S+?/(\S+)", frame, re.M)
        return match.group(1) if match else ""


def broker_xml(text: str, stomp_port: int, openwire_port: int | None = None) -> str:
    """The instance's activemq.xml whose connectors are STOMP on ``stomp_port`` of loopback and, when
    given, OpenWire on ``openwire_port``."""
    openwire = (
        f'            <transportConnector name="openwire" uri="tcp://{LOOPBACK}:{openwire_port}?transport.tcpNoDelay=true"/>\n'
        if openwire_port is not None else ""
    )
    connector = (
        "<transportConnectors>\n"
        f'            <transportConnector name="stomp" uri="stomp://{LOOPBACK}:{stomp_port}?transport.tcpNoDelay=true"/>\n'
        f"{openwire}"
        "        </transportConnectors>"
    )
    if CONNECTORS.search(text) is None:
        raise ValueError("activemq.xml has no <transportConnectors> element")
    return CONNECTORS.sub(connector, text, count=1)


def _conf_template() -> Path | None:
    for path in CONF_TEMPLATES:
        if (path / "activemq.xml").is_file():
            return path
    return None
