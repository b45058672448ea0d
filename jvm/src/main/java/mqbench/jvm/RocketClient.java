package mqbench.jvm;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.impl.MQAdminImpl;
import org.apache.rocketmq.client.impl.MQClientManager;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.netty.NettySystemConfig;

/** The RocketMQ Java client (remoting, rocketmq-client 5.x) against a NameServer ({@code spec.brokerUrl},
 *  e.g. rocketmq://127.0.0.1:9876). Each topic of the run has {@code plan.queues} queues, created by
 *  {@link #prepare} before the workers start. Producers send as {@code send} says: sync (send returns after
 *  the broker stored the message: SEND_OK, else the send fails), async (the broker's answer comes to a
 *  callback and is the send's outcome, at most {@code ASYNC_WINDOW} unanswered, as the Python driver's) or
 *  oneway (no answer). Consumers are lite pull consumers that assign() their
 *  queues (all of them for pubsub, their share for queue) and start at the queues' end, without a rebalance. */
final class RocketClient implements Client {
    private final Spec spec;
    private final String topic;
    private final int queues;
    private final String mode;  // send: sync, async or oneway
    private static final int ASYNC_WINDOW = 1000;  // as harness/drivers/rocketmq.py's
    private static final long ASYNC_WAIT_S = 30;  // as its ASYNC_WAIT: for room in the window
    private final Semaphore window = new Semaphore(ASYNC_WINDOW);
    private final AtomicReference<String> failure = new AtomicReference<>();  // async, unwatched
    private volatile Outcomes outcomes;
    private long sent;  // async: sends so far, the next one's number in its outcome
    private boolean idle;
    private DefaultMQProducer producer;
    private DefaultLitePullConsumer consumer;
    private Sink sink;

    RocketClient(Spec spec) {
        this.spec = spec;
        this.topic = spec.topicName(spec.topic);
        this.queues = ((Number) spec.plan.get("queues")).intValue();
        this.mode = spec.option("send", "sync");
    }

    // The roles of a JVM that plays many (Main.group) share one client instance, its connections and its
    // threads: the client's default gives each client its own (a name of the pid and the time), and 125
    // roles in a JVM then ran some 900 threads each in 16 JVMs, the machine's load above 2,000.
    private static final long ROUTE_WAIT_NS = 60_000_000_000L;  // as harness/drivers/rocketmq.py's ROUTE_WAIT
    private static final String SHARED_INSTANCE = "mqbench-" + ProcessHandle.current().pid();

    private String group(String role) {
        return "mqbench-" + spec.topology().get("run_tag") + "-" + role + "-" + spec.index;
    }

    @Override
    public void prepare() throws Exception {
        DefaultMQProducer admin = new DefaultMQProducer(group("admin"));
        admin.setNamesrvAddr(spec.brokerAddress());
        admin.start();
        try {
            for (int t = 0; t < spec.topologyInt("topics"); t++) {
                admin.createTopic("TBW102", spec.topicName(t), queues, null);  // TBW102: the creation key
            }
        } finally {
            admin.shutdown();
        }
    }

    @Override
    public void open(String kind) throws Exception {
        // The roles of a group share one connection to the broker (SHARED_INSTANCE), and by default the client
        // closes a connection when a request on it times out, so one slow answer takes the connection from every
        // role of the group (at 1,000 topics the client logged 337 such closes in one run). A group keeps the
        // connection (RocketMQ's own switch; the client reads it when its first instance starts).
        if (spec.grouped()) System.setProperty(NettySystemConfig.COM_ROCKETMQ_REMOTING_CLIENT_CLOSE_SOCKET_IF_TIMEOUT, "false");
        switch (kind) {
            case "producer":
                producer = spec.grouped() ? Shared.acquire(this) : newProducer(group("p"));
                awaitRoute();
                break;
            case "consumer":
                consumer = new DefaultLitePullConsumer(group("c"));
                consumer.setNamesrvAddr(spec.brokerAddress());
                consumer.setAutoCommit(false);
                if (spec.grouped()) consumer.setInstanceName(SHARED_INSTANCE);
                if (spec.grouped()) consumer.setPullThreadNums(1);  // 20 by default: per consumer, in one JVM of many
                consumer.start();
                break;
            default:
                throw new IllegalArgumentException("rocketmq has no " + kind + " here");
        }
    }

    private DefaultMQProducer newProducer(String group) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer(group);
        p.setNamesrvAddr(spec.brokerAddress());
        if (spec.grouped()) p.setInstanceName(SHARED_INSTANCE);
        p.setSendMsgTimeout((int) Math.max(3000, spec.requestTimeout * 1000));
        p.start();
        return p;
    }

    /** The producer roles of a group send through one producer, as an application that sends to many topics
     *  does (a RocketMQ producer is not bound to a topic): 500 producers of one JVM were 500 producer groups
     *  in the client's heartbeats and 500 sets of its per-producer state. The last role to close shuts it. */
    private static final class Shared {
        private static DefaultMQProducer producer;
        private static int users;

        static synchronized DefaultMQProducer acquire(RocketClient role) throws Exception {
            if (producer == null) producer = role.newProducer(role.group("p-shared"));
            users++;
            return producer;
        }

        static synchronized void release() {
            if (--users == 0 && producer != null) {
                producer.shutdown();
                producer = null;
            }
        }
    }

    /** The producer has its topic's route before it says ready (as the Kafka producers fetch their metadata):
     *  its first send otherwise asks the NameServer for it under the client's lock, which a send gives up
     *  after 3 s ("No route info of this topic"); 800 of 1,000 producers here failed so at the start. */
    private void awaitRoute() throws InterruptedException {
        long deadline = System.nanoTime() + ROUTE_WAIT_NS;
        var factory = producer.getDefaultMQProducerImpl().getMqClientFactory();
        String last = "no route";
        while (true) {
            try {  // a NameServer busy with a thousand clients' requests answers some after the 3 s timeout
                if (factory.updateTopicRouteInfoFromNameServer(topic)) {
                    var info = producer.getDefaultMQProducerImpl().getTopicPublishInfoTable().get(topic);
                    if (info != null && info.ok()) return;
                }
            } catch (Exception e) {
                last = String.valueOf(e.getMessage());
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("the rocketmq NameServer gave no route for topic " + topic + " within "
                    + ROUTE_WAIT_NS / 1_000_000_000L + " s (" + last + ")");
            }
            Thread.sleep(200);
        }
    }

    @Override
    public boolean acksSynchronously() {
        return mode.equals("sync");  // send returns with the broker's SendResult
    }

    @Override
    public boolean keepsBuffers() {
        return mode.equals("async");  // the client's async executor encodes the message after send returned
    }

    @Override
    public boolean watchOutcomes(Outcomes watcher) {
        if (!mode.equals("async")) return false;
        outcomes = watcher;
        return true;
    }

    @Override
    public void send(byte[] body) throws Exception {
        Message message = new Message(topic, body);
        switch (mode) {
            case "oneway":
                producer.sendOneway(message);
                return;
            case "async":
                sendAsync(message);
                return;
            default:
                SendResult result = producer.send(message);
                if (result.getSendStatus() != SendStatus.SEND_OK) {
                    throw new IllegalStateException("rocketmq did not store a message: " + result.getSendStatus());
                }
        }
    }

    private void sendAsync(Message message) throws Exception {
        String failed = failure.get();
        if (failed != null) throw new IllegalStateException(failed);
        if (!window.tryAcquire(ASYNC_WAIT_S, TimeUnit.SECONDS)) {
            throw new IllegalStateException("rocketmq answered none of " + ASYNC_WINDOW + " async sends within "
                + ASYNC_WAIT_S + " s");
        }
        long index = sent++;
        Outcomes told = outcomes;
        SendCallback answer = new SendCallback() {
            @Override
            public void onSuccess(SendResult result) {
                settle(told, index, result.getSendStatus() == SendStatus.SEND_OK,
                    "rocketmq did not store a message: " + result.getSendStatus());
            }

            @Override
            public void onException(Throwable e) {
                settle(told, index, false, "rocketmq failed to send a message: " + e);
            }
        };
        try {
            producer.send(message, answer);
        } catch (Exception e) {  // refused before it was handed over: no callback comes
            window.release();
            throw e;
        }
    }

    private void settle(Outcomes told, long index, boolean accepted, String why) {
        window.release();
        if (told != null) told.report(index, 1, accepted);
        else if (!accepted) failure.compareAndSet(null, why);
    }

    @Override
    public void flush(long timeoutMs) throws Exception {
        if (!mode.equals("async")) return;
        if (!window.tryAcquire(ASYNC_WINDOW, timeoutMs, TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("rocketmq answered " + (ASYNC_WINDOW - window.availablePermits())
                + " async sends not within " + timeoutMs + " ms");
        }
        window.release(ASYNC_WINDOW);
        String failed = failure.get();
        if (failed != null) throw new IllegalStateException(failed);
    }

    @Override
    public void consume(Sink sink) throws Exception {
        this.sink = sink;
        List<MessageQueue> all = new ArrayList<>();
        long deadline = System.nanoTime() + 60_000_000_000L;
        while (all.size() < queues && System.nanoTime() < deadline) {  // the route may lag the creation
            try {
                all = new ArrayList<>(consumer.fetchMessageQueues(topic));
            } catch (Exception e) {  // the route may not be served yet: as for a short answer, ask again
                if (System.nanoTime() > deadline) throw e;
            }
            if (all.size() < queues) Thread.sleep(200);
        }
        all.sort(Comparator.comparing(MessageQueue::getBrokerName).thenComparingInt(MessageQueue::getQueueId));
        List<MessageQueue> mine = new ArrayList<>();
        int topics = spec.topologyInt("topics");
        List<Integer> peers = new ArrayList<>();
        for (int c = 0; c < spec.topologyInt("consumers"); c++) {
            if (c % topics == spec.topic) peers.add(c);
        }
        int rank = Math.max(0, peers.indexOf(spec.index));
        for (int i = 0; i < all.size(); i++) {
            if (!spec.pattern().equals("queue") || i % peers.size() == rank) mine.add(all.get(i));
        }
        idle = mine.isEmpty();  // more consumers than queues: this one has no queue, as in a consumer group
        if (idle) return;
        // Start at the queues' ends as they are now: written into the consumer's offset store before assign(),
        // where a pull task that computes its start (CONSUME_FROM_LAST_OFFSET: the store first) finds them.
        // Not assign() then seekToEnd(): assign() schedules a pull task at once, and one that is past its
        // cancelled check when the seek comes takes the seek's offset, so its successor falls back to the
        // queue's end as it is when it runs, which on a loaded machine is after the first messages were sent
        // (the first message of a run was missed so, once in a whole test suite).
        // The ends are asked through the consumer's own client instance (started with it, shared by a group's
        // roles), not through a client of their own: at 1,000 topics that was 1,000 client instances started
        // and shut during the set-up, each with its threads and connections.
        MQAdminImpl admin = MQClientManager.getInstance().getOrCreateMQClientInstance(consumer).getMQAdminImpl();
        for (MessageQueue q : mine) consumer.getOffsetStore().updateOffset(q, end(admin, q, deadline), false);
        consumer.assign(mine);
    }

    /** The queue's end. Right after a topic is created the broker may not answer offset requests for its
     *  queues yet ("Invoke Broker exception"): ask again until the deadline. */
    private static long end(MQAdminImpl admin, MessageQueue q, long deadline) throws Exception {
        while (true) {
            try {
                return admin.maxOffset(q);
            } catch (Exception e) {
                if (System.nanoTime() > deadline) throw e;
                Thread.sleep(200);
            }
        }
    }

    @Override
    public int poll(long timeoutMs) throws InterruptedException {
        if (idle) {
            Thread.sleep(timeoutMs);
            return 0;
        }
        for (MessageExt m : consumer.poll(timeoutMs)) {
            sink.accept(m.getBody());
        }
        return 0;
    }

    @Override
    public void close() {
        if (producer != null && spec.grouped()) Shared.release();
        else if (producer != null) producer.shutdown();
        if (consumer != null) consumer.shutdown();
        producer = null;
        consumer = null;
    }
}
