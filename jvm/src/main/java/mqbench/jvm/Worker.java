package mqbench.jvm;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Semaphore;
import java.util.concurrent.locks.LockSupport;

/** The four roles of a worker, under the contract of the Python workers (harness/runner/worker.py): wait for
 *  the start, pace from the common start stamp (open loop at a rate, or as fast as possible), stamp with
 *  System.nanoTime() (CLOCK_MONOTONIC on Linux, the clock of Python's time.monotonic_ns()), write the
 *  header {@code <HIq>} (producer id, sequence number, send stamp) into each message, and record.
 *  Messages shorter than the full header carry {@code <HI>} only. Probes (producer id 0xFFFF, then the
 *  producer's index) are sent until the start by pub/sub producers and never recorded. */
final class Worker {
    static final int HEADER = 14;
    static final int SHORT_HEADER = 6;
    static final int PROBE_ID = 0xFFFF;
    private static final long PROBE_INTERVAL_MS = 10;
    private static final long POLL_MS = 50;
    private static final long OUTCOME_INTERVAL_NS = 5_000_000L;

    private final Spec spec;
    private final Client client;
    private final Control ctl;
    private final String tag;  // "@<i> " before each line of role i of a group, else nothing
    private final Semaphore setup;  // a group's roles set up their clients a few at a time; null: alone
    private boolean settingUp;
    private volatile long progress;
    private final int requestTimeoutMs;
    private final OutcomeLines outcomes = new OutcomeLines();

    Worker(Spec spec, Client client, Control ctl) {
        this(spec, client, ctl, "", null);
    }

    /** Role {@code tag} of a JVM that plays many ({@link Main}): its lines carry the tag, and its setup (up
     *  to ready) holds one of {@code setup}'s permits. */
    Worker(Spec spec, Client client, Control ctl, String tag, Semaphore setup) {
        this.spec = spec;
        this.client = client;
        this.ctl = ctl;
        this.tag = tag;
        this.setup = setup;
        this.requestTimeoutMs = (int) Math.round(spec.requestTimeout * 1000);
    }

    void run() throws Exception {
        Tellers.PROGRESS.add(this);
        if (setup != null) {
            setup.acquire();
            settingUp = true;
        }
        try {
            switch (spec.kind) {
                case "producer": producer(); break;
                case "consumer": consumer(); break;
                case "requester": requester(); break;
                case "replier": replier(); break;
                default: throw new IllegalArgumentException("unknown worker kind " + spec.kind);
            }
        } finally {
            endSetup();  // a role that failed before it was ready
        }
    }

    private void say(String line) {
        ctl.say(tag + line);
    }

    private void ready() {
        say("ready");
        endSetup();
    }

    private void endSetup() {
        if (settingUp) {
            settingUp = false;
            setup.release();
        }
    }

    private long reported = -1;  // the progress last told (by the progress teller's thread only)

    private void tellProgress() {
        long now = progress;
        if (now != reported) {
            say("progress " + now);
            reported = now;
        }
    }

    /** The JVM's two tellers, one thread each however many roles it plays: every role's progress every
     *  {@code PROGRESS_INTERVAL_NS}, and every watching producer's outcomes every {@code OUTCOME_INTERVAL_NS}
     *  (the relay stamps an acknowledgement when its line arrives, so this bounds how late a {@code t_ack}
     *  is; only lines with news are written). With a thread per role and teller, a producer JVM of a
     *  thousand-topic group (125 roles, 250 messages a second between them) had 250 threads waking some
     *  26,000 times a second: 125 x 200 outcome checks and 125 x 10 progress checks, by count, not measured. */
    private static final class Tellers {
        private static final long PROGRESS_INTERVAL_NS = 100_000_000L;
        static final List<Worker> PROGRESS = new CopyOnWriteArrayList<>();
        static final List<OutcomeLines> OUTCOMES = new CopyOnWriteArrayList<>();

        static {
            start("mqbench-progress", PROGRESS_INTERVAL_NS, () -> PROGRESS.forEach(Worker::tellProgress));
            start("mqbench-outcomes", OUTCOME_INTERVAL_NS, () -> OUTCOMES.forEach(OutcomeLines::flush));
        }

        private static void start(String name, long intervalNs, Runnable tell) {
            Thread thread = new Thread(() -> {
                while (true) {
                    tell.run();
                    LockSupport.parkNanos(intervalNs);
                }
            }, name);
            thread.setDaemon(true);
            thread.start();
        }
    }

    /** Outcomes as runs of consecutive sends with the same outcome, told as {@code outcome} lines every
     *  5 ms (by {@link Tellers}) and before {@code done}: one line per run, not per message. */
    private final class OutcomeLines implements Client.Outcomes {
        private final List<long[]> runs = new ArrayList<>();  // {first, count, accepted}
        private long[] open;
        // Held from taking the runs to writing their lines: a flush returns only once every run taken
        // before it is written (the producer's flush before done must not pass the teller's lines in
        // flight, or the relay converts the records before their last acknowledgements).
        private final Object telling = new Object();

        @Override
        public synchronized void report(long first, int count, boolean accepted) {
            long ok = accepted ? 1 : 0;
            if (open != null && open[2] == ok && open[0] + open[1] == first) {
                open[1] += count;
                return;
            }
            if (open != null) runs.add(open);
            open = new long[] {first, count, ok};
        }

        void flush() {
            synchronized (telling) {
                List<long[]> out;
                synchronized (this) {
                    if (open == null) return;
                    runs.add(open);
                    open = null;
                    out = new ArrayList<>(runs);
                    runs.clear();
                }
                for (long[] run : out) say("outcome " + run[0] + " " + run[1] + " " + run[2]);
            }
        }
    }

    // -- sending roles ---------------------------------------------------------------------------------

    private byte[] payload() {
        byte[] buf = new byte[spec.size];
        if (spec.randomPayload) {
            new Random(System.nanoTime()).nextBytes(buf);
        }
        return buf;
    }

    /** The bodies a producer sends in turn: the relay's pool (a file body, or distinct compressible ones), or
     *  the one zero or random body. */
    private byte[][] bodies() throws Exception {
        if (spec.bodies == null) return new byte[][] {payload()};
        byte[] all = java.nio.file.Files.readAllBytes(java.nio.file.Path.of(spec.bodies));
        int n = Math.max(1, all.length / Math.max(1, spec.size));
        byte[][] pool = new byte[n][];
        for (int i = 0; i < n; i++) pool[i] = java.util.Arrays.copyOfRange(all, i * spec.size, (i + 1) * spec.size);
        return pool;
    }

    /** A producer's share of a rate profile, as harness/runner/_send.py's Profile: (msgs/s, seconds) steps in
     *  turn, repeated; {@link #at} is the intended send offset (ns) of message n (a step of rate 0 is a pause). */
    static final class Profile {
        private final double[] rates, msgsEnd, msgsStart, tStart;
        private final double roundMsgs, roundS;

        Profile(double[][] steps) {
            int k = steps.length;
            rates = new double[k];
            msgsEnd = new double[k];
            msgsStart = new double[k];
            tStart = new double[k];
            double msgs = 0, seconds = 0;
            for (int i = 0; i < k; i++) {
                rates[i] = steps[i][0];
                msgsStart[i] = msgs;
                tStart[i] = seconds;
                msgs += steps[i][0] * steps[i][1];
                seconds += steps[i][1];
                msgsEnd[i] = msgs;
            }
            roundMsgs = msgs;
            roundS = seconds;
        }

        long at(long n) {
            double rounds = Math.floor(n / roundMsgs);
            double within = n - rounds * roundMsgs;
            int step = 0;  // the first step whose end lies beyond the message
            while (step < msgsEnd.length - 1 && msgsEnd[step] <= within) step++;
            double rate = rates[step];
            double offset = tStart[step] + (within - msgsStart[step]) / (rate > 0 ? rate : 1.0);
            return (long) ((rounds * roundS + offset) * 1e9);
        }
    }

    static void putHeader(byte[] buf, int pid, long seq, long stamp) {
        if (buf.length < SHORT_HEADER) return;
        buf[0] = (byte) pid;
        buf[1] = (byte) (pid >>> 8);
        for (int i = 0; i < 4; i++) buf[2 + i] = (byte) (seq >>> (8 * i));
        if (buf.length >= HEADER) {
            for (int i = 0; i < 8; i++) buf[6 + i] = (byte) (stamp >>> (8 * i));
        }
    }

    /** Park most of the way, spin the last stretch. A park here wakes up to about 60 µs late (the kernel's
     *  timer slack), so it stops 120 µs short below a millisecond. Yielding through that stretch instead
     *  kept a paced producer's core busy all along: at 4,000-5,000 msg/s 100 % of a core against 25-32 %
     *  parked, sends no later at the 99th percentile (docs/jvm.md); the Python workers' pacing costs 34-38 %. */
    static void sleepUntil(long deadline) {
        while (true) {
            long left = deadline - System.nanoTime();
            if (left <= 0) return;
            if (left > 1_000_000) LockSupport.parkNanos(left - 500_000);
            else if (left > 150_000) LockSupport.parkNanos(left - 120_000);
            else Thread.onSpinWait();
        }
    }

    /** Until the start: a probe every 10 ms (pub/sub producers, the slow-joiner handshake). */
    private boolean probeUntilStart() throws Exception {
        byte[] probe = new byte[SHORT_HEADER];
        putHeader(probe, PROBE_ID, spec.index, 0);
        while (!ctl.startSet()) {
            client.send(client.keepsBuffers() ? probe.clone() : probe);
            ctl.awaitStart(PROBE_INTERVAL_MS);
        }
        return !ctl.stopped();
    }

    private void producer() throws Exception {
        client.open("producer");
        if (spec.watchOutcomes) {
            boolean watched = client.watchOutcomes(outcomes);
            say("outcomes " + (watched ? "on" : "off"));
            if (watched) Tellers.OUTCOMES.add(outcomes);
        }
        ready();
        boolean go = spec.probe ? probeUntilStart() : ctl.awaitStart();
        if (!go) {
            client.close();
            return;
        }
        boolean paced = spec.rate > 0 || spec.rateProfile != null;
        List<String> stamps = new ArrayList<>(List.of("t_send"));
        if (paced) stamps.add("t_intended");
        if (client.acksSynchronously()) stamps.add("t_ack");
        Records rec = new Records(spec.capacity, stamps.toArray(String[]::new));
        String error = "";
        int seq = 0;
        try {
            seq = sendLoop(rec, bodies(), paced);
            if (seq < spec.total && ctl.stopped() && spec.durationNs == 0) {
                error = "stopped by the runner before all messages were sent";
            }
            client.flush((long) (spec.requestTimeout * 4000));
        } catch (Exception e) {
            seq = rec.count();
            error = String.valueOf(e.getMessage() != null ? e.getMessage() : e);
        }
        progress = seq;
        rec.write(spec.out, error);
        outcomes.flush();
        say("done " + seq + " " + error);
        ctl.awaitStop();  // closing now could drop queued messages
        client.close();
        outcomes.flush();  // what closing failed
    }

    private int sendLoop(Records rec, byte[][] pool, boolean paced) throws Exception {
        long start = ctl.t0(), t0 = start + spec.phaseNs;  // this producer's turn (Spec.phaseNs)
        sleepUntil(t0);
        Profile profile = spec.rateProfile != null ? new Profile(spec.rateProfile) : null;
        double period = paced && profile == null ? 1e9 / spec.rate : 0.0;
        boolean keyed = spec.keyCount > 0;
        byte[] buf = pool[0];
        long deadline = spec.durationNs > 0 ? start + spec.durationNs : Long.MAX_VALUE;
        boolean fresh = client.keepsBuffers();
        long[] tSend = rec.get("t_send");
        long[] tIntended = rec.get("t_intended");
        long[] tAck = rec.get("t_ack");  // null unless the send returns with the acknowledgement
        // A backlog case (harness/runner/_send.py Schedule): the rate until the consumers' release, then
        // period / drain_rate from the first message after it (from its intended time, or now when that
        // passed); drain_rate 0 stops the producer. The parent counts the backlog: progress every 64.
        boolean held = spec.backlog;
        int every = spec.backlog ? 63 : 1023;
        int switchSeq = 0;
        long switchAt = 0;
        int seq = 0;
        while (seq < spec.total) {
            if (seq >= tSend.length) {
                rec.room(seq);
                tSend = rec.get("t_send");
                tIntended = rec.get("t_intended");
                tAck = rec.get("t_ack");
            }
            if (held && ctl.releasedSet()) {
                held = false;
                if (spec.drainRate <= 0) break;
                switchSeq = seq;
                switchAt = Math.max(System.nanoTime(), t0 + (long) (seq * period));
                period = period / spec.drainRate;
            }
            if (paced) {
                long intended = profile != null ? t0 + profile.at(seq)
                        : spec.backlog && !held ? switchAt + (long) ((seq - switchSeq) * period)
                        : t0 + (long) (seq * period);
                sleepUntil(intended);
                tIntended[seq] = intended;
            }
            long t = System.nanoTime();
            if (t >= deadline) break;
            if (pool.length > 1) buf = pool[seq % pool.length];
            putHeader(buf, spec.index, seq, t);
            if (keyed) client.sendKeyed(fresh ? buf.clone() : buf, spec.keyOf(seq));
            else client.send(fresh ? buf.clone() : buf);
            if (tAck != null) tAck[seq] = System.nanoTime();
            tSend[seq] = t;
            seq++;
            rec.setCount(seq);
            if ((seq & every) == 0) {
                progress = seq;
                if (ctl.stopped()) break;
            }
        }
        return seq;
    }

    private void requester() throws Exception {
        client.open("requester");
        ready();
        if (!ctl.awaitStart()) {
            client.close();
            return;
        }
        boolean paced = spec.rate > 0;
        Records rec = paced ? new Records(spec.capacity, "t_send", "t_recv", "t_intended")
                            : new Records(spec.capacity, "t_send", "t_recv");
        long start = ctl.t0(), t0 = start + spec.phaseNs;
        sleepUntil(t0);
        double period = paced ? 1e9 / spec.rate : 0.0;
        long deadline = spec.durationNs > 0 ? start + spec.durationNs : Long.MAX_VALUE;
        byte[] buf = payload();
        String error = "";
        int seq = 0;
        try {
            while (seq < spec.total) {
                rec.room(seq);
                if (paced) {
                    long intended = t0 + (long) (seq * period);
                    sleepUntil(intended);
                    rec.get("t_intended")[seq] = intended;
                }
                long t = System.nanoTime();
                if (t >= deadline) break;
                putHeader(buf, spec.index, seq, t);
                byte[] reply = client.request(client.keepsBuffers() ? buf.clone() : buf, requestTimeoutMs);
                rec.get("t_recv")[seq] = reply != null ? System.nanoTime() : -1;
                rec.get("t_send")[seq] = t;
                seq++;
                rec.setCount(seq);
                if ((seq & 255) == 0) {
                    progress = seq;
                    if (ctl.stopped()) {
                        error = "stopped by the runner before all requests were made";
                        break;
                    }
                }
            }
        } catch (Exception e) {
            error = String.valueOf(e.getMessage() != null ? e.getMessage() : e);
        }
        progress = seq;
        rec.write(spec.out, error);
        say("done " + seq + " " + error);
        ctl.awaitStop();
        client.close();
    }

    // -- receiving roles -------------------------------------------------------------------------------

    /** The consumer's recorder: one stamp per message, then the header's producer id and sequence number. */
    private final class Recorder implements Client.Sink {
        final Records rec = new Records(spec.capacity, "t_recv", "producer", "seq");
        final Set<Integer> missing = new HashSet<>(spec.probeFrom);
        int foreign;
        boolean closed;  // the records are written: later deliveries are not recorded
        // The arrays themselves, looked up again only when they grow: this runs once per message.
        long[] stamps = rec.get("t_recv");
        long[] producers = rec.get("producer");
        long[] seqs = rec.get("seq");

        /** A backlog case holds the client's delivering thread (a push client's) here until the release, as
         *  the Python worker's {@code gated} does: the client stops reading and the broker keeps the rest. */
        @Override
        public void accept(byte[] body) {
            if (spec.backlog && ctl.startSet() && !ctl.releasedSet()) {
                try {
                    ctl.awaitRelease();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            record(body);
        }

        private synchronized void record(byte[] body) {
            long t = System.nanoTime();
            if (closed) return;
            if (body.length < SHORT_HEADER) {
                foreign++;
                return;
            }
            int pid = (body[0] & 0xFF) | (body[1] & 0xFF) << 8;
            long seq = (body[2] & 0xFFL) | (body[3] & 0xFFL) << 8 | (body[4] & 0xFFL) << 16 | (body[5] & 0xFFL) << 24;
            if (pid == PROBE_ID) {
                missing.remove((int) seq);
                return;
            }
            int n = rec.count();
            if (n == stamps.length) {
                rec.room(n);
                stamps = rec.get("t_recv");
                producers = rec.get("producer");
                seqs = rec.get("seq");
            }
            stamps[n] = t;
            producers[n] = pid;
            seqs[n] = seq;
            rec.setCount(n + 1);
            progress = n + 1;
        }

        synchronized boolean heardAll() {
            return missing.isEmpty();
        }
    }

    private void consumer() throws Exception {
        client.open("consumer");
        Recorder recorder = new Recorder();
        client.consume(recorder);
        ready();
        boolean reported = spec.probeFrom.isEmpty();
        while (!ctl.startSet()) {
            client.poll(POLL_MS);
            if (!reported && recorder.heardAll()) {
                say("subscribed");
                reported = true;
            }
        }
        String error = "";
        try {
            if (spec.backlog) {
                ctl.awaitRelease();  // a pull client (Kafka, RocketMQ) fetches nothing meanwhile
            }
            while (!ctl.stopped()) {
                client.poll(POLL_MS);
            }
        } catch (Exception e) {
            error = String.valueOf(e.getMessage() != null ? e.getMessage() : e);
        }
        // The records first, then the client's close: what arrived until the stop is what counts (a push
        // client's later deliveries are ignored), and a close that takes long cannot hold it back: at 1,000
        // RocketMQ topics 347 of a JVM's 500 consumers were still waiting to unregister from the broker
        // (one at a time, MQClientInstance.unregisterConsumer) seconds after the stop.
        int n;
        synchronized (recorder) {
            recorder.closed = true;
            n = recorder.rec.count();
            if (error.isEmpty() && recorder.foreign > 0) {
                error = recorder.foreign + " foreign messages ignored";
            }
            recorder.rec.write(spec.out, error);
        }
        progress = n;
        say("done " + n + " " + error);
        client.close();
    }

    private void replier() throws Exception {
        client.open("replier");
        client.reply();
        ready();
        long served = 0;
        if (ctl.awaitStart()) {
            while (!ctl.stopped()) {
                served += client.poll(POLL_MS);
                progress = served;
            }
        }
        client.close();
        Records rec = new Records(1, "served");
        rec.get("served")[0] = served;
        rec.setCount(1);
        rec.write(spec.out, "");
        say("done " + served + " ");
    }
}
