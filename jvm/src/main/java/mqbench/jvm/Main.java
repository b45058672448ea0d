package mqbench.jvm;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;

/** The JVM worker: {@code java -cp mqbench-jvm.jar mqbench.jvm.Main SPEC.json}, started and driven by the
 *  relay harness/runner/jvm.py over stdin/stdout ({@link Control}); see docs/jvm.md. */
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
            Spec spec = new Spec((Map<String, Object>) Json.parse(Files.readString(Path.of(args[0]))));
            new Worker(spec, client(spec), ctl).run();
        } catch (Throwable e) {
            // Our own refusals carry a sentence; anything else is named by its class too.
            boolean ours = e instanceof IllegalStateException || e instanceof IllegalArgumentException;
            String what = e.getMessage() != null ? e.getMessage() : "";
            ctl.say("error " + (ours && !what.isEmpty() ? what : e.getClass().getSimpleName() + ": " + what));
            System.exit(1);
        }
        System.exit(0);  // client libraries may leave non-daemon threads behind
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
