package mqbench.jvm;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.StringJoiner;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;
import org.zeromq.ZMsg;

/** A JeroMQ socket driven line by line, for the interop tests (tests/mqcore/interop/test_interop_jeromq.py):
 *  {@code java -cp mqbench-jvm.jar mqbench.jvm.Peer}. Commands on stdin, one answer line each on stdout:
 *  {@code socket TYPE} | {@code timeout MS} (of recv) | {@code identity TEXT} | {@code subscribe HEX} | {@code bind EP} (answers
 *  {@code bound <endpoint>}) | {@code connect EP} | {@code disconnect EP} | {@code send HEX...} (one frame per word, {@code -} for an
 *  empty frame) | {@code recv} (answers {@code msg HEX...} or {@code timeout} after 5 s) | {@code close}.
 *  Anything that fails answers {@code error <message>}. */
public final class Peer {
    private static final HexFormat HEX = HexFormat.of();

    private Peer() {
    }

    private static byte[] frame(String word) {
        return word.equals("-") ? new byte[0] : HEX.parseHex(word);
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        try (ZContext ctx = new ZContext()) {
            ZMQ.Socket socket = null;
            String line;
            while ((line = in.readLine()) != null) {
                String[] words = line.trim().split(" ");
                String answer = "ok";
                try {
                    switch (words[0]) {
                        case "socket":
                            socket = ctx.createSocket(SocketType.valueOf(words[1]));
                            socket.setReceiveTimeOut(5000);
                            socket.setLinger(0);
                            break;
                        case "timeout":
                            socket.setReceiveTimeOut(Integer.parseInt(words[1]));
                            break;
                        case "identity":
                            socket.setIdentity(words[1].getBytes(StandardCharsets.UTF_8));
                            break;
                        case "subscribe":
                            socket.subscribe(words.length > 1 ? frame(words[1]) : new byte[0]);
                            break;
                        case "bind":
                            socket.bind(words[1]);
                            answer = "bound " + socket.getLastEndpoint();
                            break;
                        case "connect":
                            socket.connect(words[1]);
                            break;
                        case "disconnect":
                            socket.disconnect(words[1]);
                            break;
                        case "send":
                            ZMsg msg = new ZMsg();
                            for (int i = 1; i < words.length; i++) msg.add(frame(words[i]));
                            if (!msg.send(socket)) answer = "error send failed (errno " + socket.errno() + ")";
                            break;
                        case "recv":
                            ZMsg got = ZMsg.recvMsg(socket);
                            if (got == null) {
                                answer = "timeout";
                            } else {
                                StringJoiner j = new StringJoiner(" ", "msg ", "");
                                got.forEach(f -> j.add(f.size() == 0 ? "-" : HEX.formatHex(f.getData())));
                                answer = j.toString();
                            }
                            break;
                        case "close":
                            System.out.println("ok");
                            return;
                        default:
                            answer = "error unknown command " + words[0];
                    }
                } catch (Exception e) {
                    answer = "error " + e;
                }
                System.out.println(answer);
                System.out.flush();
            }
        }
    }
}
