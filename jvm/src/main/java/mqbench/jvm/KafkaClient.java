package mqbench.jvm;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/** The Kafka Java client, in the layout of the kafka driver (harness/drivers/kafka.py): the plan's topics
 *  with {@code plan.partitions} partitions, producers round-robin over partitions with asynchronous sends
 *  (acks, linger_ms, batch_size, compression from the options; idempotence and the delivery timeout as the plan
 *  says; a failed send is reported at the next send or the flush, or, when outcomes are watched, as that send's
 *  outcome), consumers assign() their partitions (all of them for pubsub, their share for queue) and start
 *  at the end offsets as of consume(). */
final class KafkaClient implements Client {
    private final Spec spec;
    private final int partitions;
    private final String topic;
    private KafkaProducer<byte[], byte[]> producer;
    private KafkaConsumer<byte[], byte[]> consumer;
    private final AtomicReference<Exception> failure = new AtomicReference<>();
    private int nextPartition;
    private long sent;  // sends so far: the next one's number in its outcome
    private Outcomes outcomes;
    private boolean acknowledged;  // acks 1 or all: the broker answers each batch
    private Sink sink;
    private List<TopicPartition> assigned = new ArrayList<>();

    KafkaClient(Spec spec) {
        this.spec = spec;
        this.partitions = ((Number) spec.plan.get("partitions")).intValue();
        this.topic = spec.topicName(spec.topic);
        this.nextPartition = spec.index % partitions;
    }

    @Override
    public void open(String kind) {
        Properties p = new Properties();
        p.put("bootstrap.servers", spec.brokerAddress());
        switch (kind) {
            case "producer":
                String acks = spec.option("acks", "1").equals("-1") ? "all" : spec.option("acks", "1");
                acknowledged = !acks.equals("0");
                p.put("acks", acks);
                p.put("linger.ms", String.valueOf(spec.optionLong("linger_ms", 5)));  // the driver's default
                p.put("batch.size", String.valueOf(spec.optionLong("batch_size", 16384)));
                p.put("compression.type", spec.option("compression", "none"));
                // On with acks=all on Apache Kafka (KafkaDriver.idempotent: Tansu may lack InitProducerId).
                p.put("enable.idempotence", String.valueOf(acks.equals("all") && spec.planBool("idempotence", false)));
                // Retries stay unbounded (the default) within the delivery timeout, as Kafka advises.
                p.put("delivery.timeout.ms", String.valueOf(spec.planLong("delivery_timeout_ms", 120_000)));
                p.put("max.request.size", String.valueOf(8 * 1024 * 1024));
                producer = new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
                break;
            case "consumer":
                p.put("enable.auto.commit", "false");
                p.put("auto.offset.reset", "earliest");
                p.put("fetch.max.bytes", String.valueOf(64 * 1024 * 1024));
                p.put("max.partition.fetch.bytes", String.valueOf(16 * 1024 * 1024));
                consumer = new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
                break;
            default:
                throw new IllegalArgumentException("kafka has no " + kind + " here");
        }
    }

    @Override
    public boolean watchOutcomes(Outcomes watcher) {
        if (!acknowledged) return false;  // acks=0: the broker never answers
        outcomes = watcher;
        return true;
    }

    @Override
    public void send(byte[] body) throws Exception {
        Exception failed = failure.get();
        if (failed != null) throw new IllegalStateException("kafka failed to deliver a message: " + failed);
        int partition = nextPartition;
        nextPartition = (partition + 1) % partitions;
        long index = sent++;
        Outcomes told = outcomes;
        // send() appends a copy of the value to a batch before it returns, so the buffer may be reused.
        producer.send(new ProducerRecord<>(topic, partition, null, body), (meta, exc) -> {
            if (told != null) {
                told.report(index, 1, exc == null);  // a failure is this send's outcome; the producer goes on
            } else if (exc != null) {
                failure.compareAndSet(null, exc);
            }
        });
    }

    @Override
    public void flush(long timeoutMs) throws Exception {
        Thread flusher = new Thread(producer::flush, "mqbench-flush");
        flusher.start();
        flusher.join(timeoutMs);
        Exception failed = failure.get();
        if (failed != null) throw new IllegalStateException("kafka failed to deliver a message: " + failed);
    }

    /** The partitions this consumer reads: all (pubsub) or its share among its topic's consumers (queue). */
    private List<TopicPartition> partitions() {
        List<TopicPartition> out = new ArrayList<>();
        int topics = spec.topologyInt("topics");
        List<Integer> peers = new ArrayList<>();
        for (int c = 0; c < spec.topologyInt("consumers"); c++) {
            if (c % topics == spec.topic) peers.add(c);
        }
        boolean queue = spec.pattern().equals("queue");
        int rank = peers.contains(spec.index) ? peers.indexOf(spec.index) : spec.index % Math.max(1, peers.size());
        for (int p = 0; p < partitions; p++) {
            if (!queue || p % peers.size() == rank) out.add(new TopicPartition(topic, p));
        }
        return out;
    }

    @Override
    public void consume(Sink sink) {
        this.sink = sink;
        assigned = partitions();
        consumer.assign(assigned);
        if (!assigned.isEmpty()) {
            consumer.seekToEnd(assigned);
            for (TopicPartition tp : assigned) consumer.position(tp);  // resolve the end offsets now
        }
    }

    @Override
    public int poll(long timeoutMs) throws Exception {
        if (assigned.isEmpty()) {  // more consumers than partitions: nothing to read
            Thread.sleep(timeoutMs);
            return 0;
        }
        for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(timeoutMs))) {
            sink.accept(r.value());
        }
        return 0;
    }

    @Override
    public void close() {
        if (producer != null) producer.close(Duration.ofSeconds(10));
        if (consumer != null) consumer.close(Duration.ofSeconds(5));
        producer = null;
        consumer = null;
    }
}
