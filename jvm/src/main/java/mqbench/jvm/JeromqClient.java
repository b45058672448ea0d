package mqbench.jvm;

import java.util.ArrayList;
import java.util.List;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;
import org.zeromq.ZMQException;

/** JeroMQ, in the topology of the zmq driver (harness/drivers/zmq_driver.py), whose plan it reads:
 *  producers bind (PUSH for queue, PUB for pubsub) and each consumer connects to every producer of its
 *  topic; for reqrep each replier binds a REP and each requester's REQ connects to every replier of its
 *  topic. Options: sndhwm, rcvhwm, io_threads.
 *
 *  <p>A connecting role is ready once each of its connections has completed its ZMTP handshake (seen on the
 *  socket's monitor), and dials again a connection that has been connected 2 s without one ({@link Handshakes}). */
final class JeromqClient implements Client {
    private static final int BURST = 4096;  // messages one poll may deliver before returning
    private final Spec spec;
    private ZContext ctx;
    private ZMQ.Socket socket;
    private Sink sink;
    private List<String> peers;

    JeromqClient(Spec spec) {
        this.spec = spec;
    }

    @Override
    public boolean keepsBuffers() {
        return true;  // send(byte[]) queues the array itself, without a copy
    }

    @SuppressWarnings("unchecked")
    private String endpoint(int i) {
        return (String) ((List<Object>) spec.plan.get("endpoints")).get(i);
    }

    /** Endpoints of the binders (producers, or repliers for reqrep) that share this worker's topic. */
    private List<String> peers(boolean binderIsProducer) {
        int topics = spec.topologyInt("topics");
        int count = spec.topologyInt(binderIsProducer ? "producers" : "consumers");
        List<String> out = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            if (i % topics == spec.topic) out.add(endpoint(i));
        }
        return out;
    }

    private ZMQ.Socket socket(SocketType type) {
        ZMQ.Socket s = ctx.createSocket(type);
        if (spec.options.containsKey("sndhwm")) s.setSndHWM((int) spec.optionLong("sndhwm", 1000));
        if (spec.options.containsKey("rcvhwm")) s.setRcvHWM((int) spec.optionLong("rcvhwm", 1000));
        s.setLinger(1000);
        return s;
    }

    @Override
    public void open(String kind) {
        ctx = new ZContext((int) spec.optionLong("io_threads", 1));
        boolean pubsub = spec.pattern().equals("pubsub");
        switch (kind) {
            case "producer":
                socket = socket(pubsub ? SocketType.PUB : SocketType.PUSH);
                bind(endpoint(spec.index));
                break;
            case "consumer":
                socket = socket(pubsub ? SocketType.SUB : SocketType.PULL);
                if (pubsub) socket.subscribe(new byte[0]);
                Handshakes.connect(ctx, socket, peers(true));
                break;
            case "replier":
                socket = socket(SocketType.REP);
                bind(endpoint(spec.index));
                break;
            case "requester":
                peers = peers(false);
                socket = requestSocket();
                break;
            default:
                throw new IllegalArgumentException("jeromq has no " + kind);
        }
    }

    private void bind(String endpoint) {
        try {
            socket.bind(endpoint);
        } catch (ZMQException e) {
            throw new IllegalStateException("jeromq cannot bind " + endpoint + ": " + ZMQ.Error.findByCode(e.getErrorCode()), e);
        }
    }

    private ZMQ.Socket requestSocket() {
        ZMQ.Socket s = socket(SocketType.REQ);
        Handshakes.connect(ctx, s, peers);
        return s;
    }

    @Override
    public void send(byte[] body) {
        if (!socket.send(body, 0)) {
            throw new IllegalStateException("jeromq refused a message (errno " + socket.errno() + ")");
        }
    }

    @Override
    public void consume(Sink sink) {
        this.sink = sink;
    }

    @Override
    public int poll(long timeoutMs) {
        if (sink == null) {  // replier: echo what arrives
            socket.setReceiveTimeOut((int) timeoutMs);
            int served = 0;
            byte[] request = socket.recv(0);
            while (request != null) {
                socket.send(request, 0);
                served++;
                request = served < BURST ? socket.recv(ZMQ.DONTWAIT) : null;
            }
            return served;
        }
        socket.setReceiveTimeOut((int) timeoutMs);
        byte[] msg = socket.recv(0);
        for (int n = 0; msg != null; n++) {
            sink.accept(msg);
            msg = n < BURST ? socket.recv(ZMQ.DONTWAIT) : null;
        }
        return 0;
    }

    @Override
    public byte[] request(byte[] body, long timeoutMs) {
        socket.send(body, 0);
        socket.setReceiveTimeOut((int) timeoutMs);
        byte[] reply = socket.recv(0);
        if (reply == null) {  // a REQ that lost its reply cannot send again: start over with a new one
            ctx.destroySocket(socket);
            socket = requestSocket();
        }
        return reply;
    }

    @Override
    public void reply() {
    }

    @Override
    public void close() {
        if (ctx != null) {
            ctx.close();
            ctx = null;
        }
    }
}
