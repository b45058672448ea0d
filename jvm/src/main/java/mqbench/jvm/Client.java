package mqbench.jvm;

/** One messaging client behind the worker, in the shape of OpenMessaging Benchmark's drivers: it moves bytes
 *  and never takes timings (Worker owns System.nanoTime()). A new Java client is one class implementing
 *  this, plus one line in {@link Main#client}. Methods of a role are only called after {@link #open} for
 *  that role; a client throws for roles it does not support. */
interface Client extends AutoCloseable {

    /** Receives each message; the recorder stamps it. Called by one thread at a time. */
    interface Sink {
        void accept(byte[] body);
    }

    /** Told what became of sends {@code first .. first + count - 1} (numbered from 0 in the order of
     *  {@link #send}): acknowledged by the system, or refused / failed to be stored. Any thread may call it. */
    interface Outcomes {
        void report(long first, int count, boolean accepted);
    }

    /** Before any worker starts: create what the run needs on the server (topics), then return. Run once per
     *  case by the parent process ({@code Main --prepare SPEC.json}) for systems whose Python side cannot. */
    default void prepare() throws Exception {
    }

    /** Connect and create what {@code kind} (producer, consumer, requester, replier) needs. */
    void open(String kind) throws Exception;

    /** True when {@link #send} keeps a reference to the array after returning (the worker then hands it a
     *  fresh copy per message instead of reusing one buffer). */
    default boolean keepsBuffers() {
        return false;
    }

    /** Before the first send: report each send's outcome to {@code outcomes} when the system acknowledges
     *  sends asynchronously (Kafka acks, publisher confirms). False when there is nothing to be told beyond
     *  {@link #send} returning; then nothing is reported. As the Python drivers' Producer.watch_outcomes. */
    default boolean watchOutcomes(Outcomes outcomes) {
        return false;
    }

    /** True when {@link #send} returns only once the system acknowledged the message (RocketMQ's synchronous
     *  send): the worker then stamps each message's {@code t_ack} as {@link #send} returns, as the Python
     *  drivers' Producer.acks_synchronously. */
    default boolean acksSynchronously() {
        return false;
    }

    /** Hand one message over; blocks under back-pressure; throws when the system refused it. */
    default void send(byte[] body) throws Exception {
        throw new UnsupportedOperationException("this client has no producer");
    }

    /** {@link #send} with a message key ({@code k0}, {@code k1}, ...), by which the system routes it (Kafka's
     *  partition by the key's hash, RabbitMQ's routing key), for clients whose Python driver declares keys. */
    default void sendKeyed(byte[] body, String key) throws Exception {
        throw new UnsupportedOperationException("this client has no message keys");
    }

    /** Wait until everything handed over has left or been confirmed, at most {@code timeoutMs}; throws
     *  when a send was refused meanwhile. */
    default void flush(long timeoutMs) throws Exception {
    }

    /** Subscribe/attach; from now on messages go to {@code sink} (from {@link #poll} or a client thread). */
    default void consume(Sink sink) throws Exception {
        throw new UnsupportedOperationException("this client has no consumer");
    }

    /** Deliver what arrives for at most about {@code timeoutMs}; push-style clients just wait. Returns the
     *  number of requests answered for a replier, else 0. */
    default int poll(long timeoutMs) throws Exception {
        Thread.sleep(timeoutMs);
        return 0;
    }

    /** One request and its reply, or null when none came within {@code timeoutMs}. */
    default byte[] request(byte[] body, long timeoutMs) throws Exception {
        throw new UnsupportedOperationException("this client does not support request/reply");
    }

    /** Start echoing requests (answered from {@link #poll} or a client thread). */
    default void reply() throws Exception {
        throw new UnsupportedOperationException("this client does not support request/reply");
    }

    @Override
    void close();
}
