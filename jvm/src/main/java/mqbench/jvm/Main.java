package mqbench.jvm;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Semaphore;

/** The JVM worker: {@code java -cp mqbench-jvm.jar mqbench.jvm.Main SPEC.json}, started and driven by the
 *  relay harness/runner/jvm.py over stdin/stdout ({@link Control}); see docs/jvm.md. SPEC.json holds one
 *  role's spec, or a list of them: then this JVM plays every role of the list, each in a thread of its own
 *  with its own client, and tags each role's lines with its place in the list ({@code @3 progress 1200});
 *  a role that fails says so under its tag and the others go on. The JVM exits once every role ended. */
public final class Main {
    private Main() {
    }

    static Client client(Spec spec) {
        switch (spec.client) {
            case "jeromq": return new JeromqClient(spec);
            case "kafka": return new KafkaClient(spec);
            case "rabbitmq": return new RabbitClient(spec);
            case "rocketmq": return new RocketClient(spec);
            default: throw new IllegalArgumentException("the JVM worker has no client " + spec.client);
        }
    }

    @SuppressWarnings("unchecked")
    public static void main(String[] args) {
        if (args.length == 2 && args[0].equals("--prepare")) {
            prepare(args[1]);
            return;
        }
        Control ctl = new Control();
        ctl.say("hello");
        try {
            Object json = Json.parse(Files.readString(Path.of(args[0])));
            if (json instanceof List) {
                group((List<Object>) json, ctl);
            } else {
                Spec spec = new Spec((Map<String, Object>) json);
                new Worker(spec, client(spec), ctl).run();
            }
        } catch (Throwable e) {
            ctl.say("error " + describe(e));
            System.exit(1);
        }
        System.exit(0);  // client libraries may leave non-daemon threads behind
    }

    /** Our own refusals carry a sentence; anything else is named by its class too. */
    private static String describe(Throwable e) {
        boolean ours = e instanceof IllegalStateException || e instanceof IllegalArgumentException;
        String what = e.getMessage() != null ? e.getMessage() : "";
        return ours && !what.isEmpty() ? what : e.getClass().getSimpleName() + ": " + what;
    }

    /** Every role of {@code specs} in a thread of its own, until each has ended; {@code setup_at_once} of
     *  them set up their clients at a time (the Python group's gate, harness/runner/worker.py). */
    @SuppressWarnings("unchecked")
    private static void group(List<Object> specs, Control ctl) throws InterruptedException {
        List<Thread> roles = new ArrayList<>();
        Semaphore setup = null;
        for (int i = 0; i < specs.size(); i++) {
            String tag = "@" + i + " ";
            Map<String, Object> fields = (Map<String, Object>) specs.get(i);
            if (setup == null) setup = new Semaphore(Math.max(1, new Spec(fields).setupAtOnce), true);
            Semaphore gate = setup;
            Thread role = new Thread(() -> {
                try {
                    Spec spec = new Spec(fields);
                    new Worker(spec, client(spec), ctl, tag, gate).run();
                } catch (Throwable e) {
                    ctl.say(tag + "error " + describe(e));
                }
            }, "mqbench-role-" + i);
            role.start();
            roles.add(role);
        }
        for (Thread role : roles) role.join();
    }

    /** {@link Client#prepare} of the spec's client; the outcome is the exit status, a failure on stderr. */
    @SuppressWarnings("unchecked")
    private static void prepare(String specPath) {
        try {
            Spec spec = new Spec((Map<String, Object>) Json.parse(Files.readString(Path.of(specPath))));
            client(spec).prepare();
        } catch (Throwable e) {
            System.err.println("error " + e);
            System.exit(1);
        }
        System.exit(0);
    }
}
