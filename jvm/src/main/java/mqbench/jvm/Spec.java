package mqbench.jvm;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/** What one worker does: the same fields as the Python workers' WorkerSpec (harness/runner/worker.py),
 *  written as JSON by the relay (harness/runner/jvm.py). Values a client needs from the plan or the
 *  variant's options are read through the typed getters below. */
final class Spec {
    final String kind;     // producer | consumer | requester | replier
    final String name;
    final String client;   // jeromq | kafka | rabbitmq | rocketmq
    final String brokerUrl; // null for brokerless systems
    final Map<String, Object> options;
    final Map<String, Object> plan;
    final int index;       // Role.index: producer/consumer number, the header's producer id
    final int topic;       // Role.topic
    final int size;
    final boolean randomPayload;
    final long total;      // messages including warmup; Long.MAX_VALUE: until the deadline
    final long durationNs; // 0: no deadline
    final double rate;     // msgs/s of this producer; 0: as fast as possible
    final long phaseNs;    // a paced producer's first send after the common start (WorkerSpec.phase_ns)
    final int capacity;
    final String out;
    final double requestTimeout;
    final boolean probe;
    final boolean backlog; // a backlog case: consumers receive nothing until the relay releases them
    final double drainRate; // a backlog case's producers: their rate after the release, x rate (0: they stop)
    final boolean watchOutcomes; // the relay wants each send's outcome (Client#watchOutcomes)
    final List<Integer> probeFrom = new ArrayList<>();
    // Workloads (harness/runner/jvm.py spec_json): a key per message, a rate profile, a pool of bodies.
    final int keyCount;    // 0: no keys
    final int[] keyPicks;  // random keys: the key index of seq by seq % length (harness/runner/_keys.py); null: in turn
    final double[][] rateProfile; // this producer's (msgs/s, seconds) steps in turn; null: none
    final String bodies;   // a file of bodies of spec.size bytes each, sent in turn; null: zero or random bodies
    // A JVM that plays many roles (Main.group): how many set up their clients at once; 0: this role alone.
    final int setupAtOnce;

    @SuppressWarnings("unchecked")
    Spec(Map<String, Object> m) {
        kind = (String) m.get("kind");
        name = (String) m.get("name");
        client = (String) m.get("client");
        brokerUrl = (String) m.get("broker_url");
        options = (Map<String, Object>) m.get("options");
        plan = (Map<String, Object>) m.get("plan");
        index = ((Number) m.get("index")).intValue();
        topic = ((Number) m.get("topic")).intValue();
        size = ((Number) m.get("size")).intValue();
        randomPayload = "random".equals(m.get("payload"));
        total = m.get("total") == null ? Long.MAX_VALUE : ((Number) m.get("total")).longValue();
        durationNs = m.get("duration_ns") == null ? 0 : ((Number) m.get("duration_ns")).longValue();
        rate = m.get("rate") == null ? 0.0 : ((Number) m.get("rate")).doubleValue();
        phaseNs = m.get("phase_ns") == null ? 0 : ((Number) m.get("phase_ns")).longValue();
        capacity = Math.max(1024, ((Number) m.get("capacity")).intValue());
        out = (String) m.get("out");
        requestTimeout = ((Number) m.get("request_timeout")).doubleValue();
        probe = Boolean.TRUE.equals(m.get("probe"));
        backlog = Boolean.TRUE.equals(m.get("backlog"));
        drainRate = m.get("drain_rate") == null ? 1.0 : ((Number) m.get("drain_rate")).doubleValue();
        watchOutcomes = Boolean.TRUE.equals(m.get("watch_outcomes"));
        for (Object p : (List<Object>) m.get("probe_from")) {
            probeFrom.add(((Number) p).intValue());
        }
        keyCount = m.get("key_count") == null ? 0 : ((Number) m.get("key_count")).intValue();
        List<Object> picks = (List<Object>) m.get("key_picks");
        keyPicks = picks == null ? null : picks.stream().mapToInt(p -> ((Number) p).intValue()).toArray();
        List<Object> steps = (List<Object>) m.get("rate_profile");
        rateProfile = steps == null || steps.isEmpty() ? null : steps.stream()
            .map(s -> ((List<Object>) s).stream().mapToDouble(v -> ((Number) v).doubleValue()).toArray())
            .toArray(double[][]::new);
        bodies = (String) m.get("bodies");
        setupAtOnce = m.get("setup_at_once") == null ? 0 : ((Number) m.get("setup_at_once")).intValue();
    }

    /** This JVM plays many roles: a client keeps its own threads few (one core's worth of roles each). */
    boolean grouped() {
        return setupAtOnce > 0;
    }

    /** The name of the key sent with message {@code seq} (harness/runner/_keys.py: in turn from this
     *  producer's index, or the random picks). */
    String keyOf(long seq) {
        int i = keyPicks == null ? (int) ((seq + index) % keyCount) : keyPicks[(int) (seq % keyPicks.length)];
        return "k" + i;
    }

    @SuppressWarnings("unchecked")
    Map<String, Object> topology() {
        return (Map<String, Object>) plan.get("topology");
    }

    String pattern() {
        return (String) topology().get("pattern");
    }

    int topologyInt(String key) {
        return ((Number) topology().get(key)).intValue();
    }

    /** The run's name of topic {@code t}, as Topology.topic_name builds it in Python. */
    String topicName(int t) {
        return "mqbench-" + topology().get("run_tag") + "-t" + t;
    }

    String option(String key, String fallback) {
        Object v = options.get(key);
        return v == null ? fallback : String.valueOf(v);
    }

    /** A number from the plan (what the Python driver decided for every worker), or {@code fallback}. */
    long planLong(String key, long fallback) {
        Object v = plan.get(key);
        return v == null ? fallback : ((Number) v).longValue();
    }

    boolean planBool(String key, boolean fallback) {
        Object v = plan.get(key);
        return v == null ? fallback : Boolean.TRUE.equals(v);
    }

    long optionLong(String key, long fallback) {
        Object v = options.get(key);
        return v == null ? fallback : Long.parseLong(String.valueOf(v).trim());
    }

    boolean optionBool(String key, boolean fallback) {
        Object v = options.get(key);
        if (v == null) return fallback;
        String s = String.valueOf(v).trim().toLowerCase();
        return s.equals("true") || s.equals("yes") || s.equals("on") || s.equals("1");
    }

    /** host:port of the broker URL (scheme, credentials and path dropped). */
    String brokerAddress() {
        String rest = brokerUrl.contains("://") ? brokerUrl.substring(brokerUrl.indexOf("://") + 3) : brokerUrl;
        rest = rest.substring(rest.lastIndexOf('@') + 1);
        int slash = rest.indexOf('/');
        return slash >= 0 ? rest.substring(0, slash) : rest;
    }
}
