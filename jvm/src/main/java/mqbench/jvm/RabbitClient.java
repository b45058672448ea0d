package mqbench.jvm;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Address;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import java.net.URI;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentSkipListSet;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/** The RabbitMQ Java client (amqp-client), in the layout of the rabbitmq driver (harness/drivers/rabbitmq.py):
 *  queue: one queue per topic through the default exchange; pubsub: a fanout exchange per topic, each
 *  consumer with its own queue (exclusive, or durable and named {@code <exchange>.c<n>} when durable);
 *  reqrep: requests on the topic's queue, replies through direct reply-to. Options: persistent, confirms,
 *  prefetch, manual_ack, queue_type (classic; quorum and stream queues are durable, declared with the
 *  plan's {@code queue_arguments}; a stream is read by every consumer from its start, with acks for its
 *  credit). A cluster's URL is its nodes' URLs joined by commas: the client tries them in order. With
 *  confirms, publishing keeps at most {@code CONFIRM_WINDOW} messages unconfirmed (as PerfTest's -c does);
 *  each confirm is its send's outcome when outcomes are watched, else a nack fails the next send or the
 *  flush. A keyed run publishes to the topic's direct exchange with the message's key. */
final class RabbitClient implements Client {
    private static final String REPLY_TO = "amq.rabbitmq.reply-to";
    private static final int CONFIRM_WINDOW = 1000;
    private final Spec spec;
    private final String name;
    private final boolean durable;
    private final boolean stream;
    private final Map<String, Object> queueArguments;
    private Connection conn;
    private java.util.concurrent.ExecutorService dispatch;  // a grouped role's delivery thread
    private Channel channel;
    private AMQP.BasicProperties props;
    private Semaphore window;
    private volatile Outcomes outcomes;  // told each send's confirm (watchOutcomes); null: a nack fails the producer
    private final AtomicReference<String> failure = new AtomicReference<>();
    private final AtomicLong answered = new AtomicLong();
    private final BlockingQueue<byte[]> replies = new ArrayBlockingQueue<>(16);
    private volatile long correlation;
    private String exchange = "";
    private String routingKey;

    RabbitClient(Spec spec) {
        this.spec = spec;
        this.name = spec.topicName(spec.topic);
        String type = spec.option("queue_type", "classic");
        this.stream = type.equals("stream");
        this.durable = spec.optionBool("persistent", false) || !type.equals("classic");
        @SuppressWarnings("unchecked")
        Map<String, Object> arguments = (Map<String, Object>) spec.plan.get("queue_arguments");
        this.queueArguments = arguments == null ? null : new HashMap<>(arguments);
    }

    /** Routed through the topic's fanout exchange to each consumer's own queue (pubsub, but not a stream). */
    private boolean fanout() {
        return spec.pattern().equals("pubsub") && !stream;
    }

    @Override
    public void open(String kind) throws Exception {
        ConnectionFactory f = new ConnectionFactory();
        String[] urls = spec.brokerUrl.split(",");
        f.setUri(urls[0]);  // credentials and virtual host; every node of a cluster shares them
        f.setRequestedHeartbeat(0);  // workers may wait at the start barrier longer than a heartbeat interval
        List<Address> nodes = new ArrayList<>();
        for (String url : urls) {
            URI u = new URI(url);
            nodes.add(new Address(u.getHost(), u.getPort() == -1 ? 5672 : u.getPort()));
        }
        if (spec.grouped()) {
            // Deliveries on one thread of the connection's own (by default twice the cores, per connection).
            dispatch = java.util.concurrent.Executors.newSingleThreadExecutor(r -> {
                Thread t = new Thread(r, "mqbench-dispatch-" + spec.name);
                t.setDaemon(true);
                return t;
            });
            f.setSharedExecutor(dispatch);
        }
        conn = f.newConnection(nodes, "mqbench-" + spec.name);
        channel = conn.createChannel();
        boolean pubsub = fanout();
        if (kind.equals("producer") || kind.equals("consumer")) {
            declare(pubsub);  // again, as applications do: idempotent
        }
        if (kind.equals("producer")) {
            exchange = pubsub || keyed() ? name : "";  // a keyed run's topic exchange is direct, named as the topic
            routingKey = pubsub ? "" : name;
            props = new AMQP.BasicProperties.Builder().deliveryMode(durable ? 2 : 1).build();
            if (spec.optionBool("confirms", false)) {
                window = new Semaphore(CONFIRM_WINDOW);
                channel.confirmSelect();
                channel.addConfirmListener((tag, multiple) -> release(tag, multiple, true),
                    (tag, multiple) -> {
                        if (outcomes == null) failure.compareAndSet(null, "rabbitmq nacked message " + tag);
                        release(tag, multiple, false);
                    });
            }
        }
    }

    private final ConcurrentSkipListSet<Long> unconfirmed = new ConcurrentSkipListSet<>();

    /** With confirms: each send's confirm (or nack) reported as its outcome; send n is the channel's
     *  publish sequence number n + 1 (numbered from 1 once confirms are selected). As the pika driver's. */
    @Override
    public boolean watchOutcomes(Outcomes watcher) {
        if (window == null) return false;  // no confirms: the broker tells nothing
        outcomes = watcher;
        return true;
    }

    /** Settles one tag, or every unconfirmed tag up to it ({@code multiple}), telling their outcomes as runs
     *  of consecutive sends. Called on the connection's thread. */
    private void release(long tag, boolean multiple, boolean accepted) {
        Outcomes told = outcomes;
        if (multiple) {
            var head = unconfirmed.headSet(tag, true);  // published already: later tags are all greater
            int n = 0;
            long first = 0, count = 0;
            for (long t : head) {
                n++;
                if (told == null) continue;
                if (count > 0 && t == first + count) {
                    count++;
                    continue;
                }
                if (count > 0) told.report(first - 1, (int) count, accepted);
                first = t;
                count = 1;
            }
            if (count > 0) told.report(first - 1, (int) count, accepted);
            head.clear();
            window.release(n);
        } else if (unconfirmed.remove(tag)) {
            if (told != null) told.report(tag - 1, 1, accepted);
            window.release();
        }
    }

    /** The run's message keys: a direct exchange of the topic's name routes by them (harness/drivers/rabbitmq.py). */
    private boolean keyed() {
        return spec.keyCount > 0;
    }

    /** As the Python driver: pubsub's exchange is fanout, or direct in a keyed run; a queue of a keyed run is
     *  bound to a direct exchange of its name with every key. */
    private void declare(boolean pubsub) throws Exception {
        if (pubsub) {
            channel.exchangeDeclare(name, keyed() ? "direct" : "fanout", durable);
            return;
        }
        channel.queueDeclare(name, durable, false, false, queueArguments);
        if (keyed()) {
            channel.exchangeDeclare(name, "direct", durable);
            bindEveryKey(name);
        }
    }

    private void bindEveryKey(String queue) throws Exception {
        for (int k = 0; k < spec.keyCount; k++) channel.queueBind(queue, name, "k" + k);
    }

    @Override
    public void send(byte[] body) throws Exception {
        publish(routingKey, body);
    }

    @Override
    public void sendKeyed(byte[] body, String key) throws Exception {
        publish(key, body);
    }

    private void publish(String key, byte[] body) throws Exception {
        String failed = failure.get();
        if (failed != null) throw new IllegalStateException(failed);
        if (window != null) {
            window.acquire();
            unconfirmed.add(channel.getNextPublishSeqNo());
        }
        channel.basicPublish(exchange, key, props, body);  // written out before it returns
    }

    @Override
    public void flush(long timeoutMs) throws Exception {
        if (window != null && !channel.waitForConfirms(timeoutMs) && outcomes == null) {
            failure.compareAndSet(null, "rabbitmq nacked a message");  // watched: each nack was its send's outcome
        }
        String failed = failure.get();
        if (failed != null) throw new IllegalStateException(failed);
    }

    @Override
    public void consume(Sink sink) throws Exception {
        String queue = name;
        if (fanout()) {
            if (durable) {
                queue = name + ".c" + spec.index;
                channel.queueDeclare(queue, true, false, false, queueArguments);
            } else {
                queue = channel.queueDeclare("", false, true, true, null).getQueue();
            }
            if (keyed()) bindEveryKey(queue);
            else channel.queueBind(queue, name, "");
        }
        boolean manual = spec.optionBool("manual_ack", false) || stream;  // a stream's credit comes with acks
        if (manual) channel.basicQos((int) spec.optionLong("prefetch", 100));
        Map<String, Object> from = stream ? Map.of("x-stream-offset", "first") : Map.of();
        channel.basicConsume(queue, !manual, from, (tag, delivery) -> {
            sink.accept(delivery.getBody());
            if (manual) channel.basicAck(delivery.getEnvelope().getDeliveryTag(), false);
        }, tag -> { });
    }

    @Override
    public byte[] request(byte[] body, long timeoutMs) throws Exception {
        if (correlation == 0) {
            channel.basicConsume(REPLY_TO, true, (tag, delivery) -> {
                if (String.valueOf(correlation).equals(delivery.getProperties().getCorrelationId())) {
                    replies.offer(delivery.getBody());
                }
            }, tag -> { });
        }
        correlation++;
        replies.clear();
        AMQP.BasicProperties p = new AMQP.BasicProperties.Builder()
            .replyTo(REPLY_TO).correlationId(String.valueOf(correlation)).build();
        channel.basicPublish("", name, p, body);
        return replies.poll(timeoutMs, TimeUnit.MILLISECONDS);
    }

    @Override
    public void reply() throws Exception {
        channel.basicQos((int) spec.optionLong("prefetch", 100));
        channel.basicConsume(name, true, (tag, delivery) -> {
            AMQP.BasicProperties p = new AMQP.BasicProperties.Builder()
                .correlationId(delivery.getProperties().getCorrelationId()).build();
            channel.basicPublish("", delivery.getProperties().getReplyTo(), p, delivery.getBody());
            answered.incrementAndGet();
        }, tag -> { });
    }

    @Override
    public int poll(long timeoutMs) throws Exception {
        long before = answered.get();
        Thread.sleep(timeoutMs);  // deliveries arrive on the client's own thread
        if (conn != null && !conn.isOpen()) {
            throw new IllegalStateException("rabbitmq connection lost: " + conn.getCloseReason());
        }
        return (int) (answered.get() - before);
    }

    @Override
    public void close() {
        if (conn != null) {
            conn.abort(5000);
            conn = null;
        }
        if (dispatch != null) {
            dispatch.shutdownNow();
            dispatch = null;
        }
    }
}
