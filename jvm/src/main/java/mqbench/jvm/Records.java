package mqbench.jvm;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;

/** Growable int64 arrays, written at the end as little-endian files plus a JSON index
 *  ({@code <out>.jvm.json}, written last, under a temporary name then renamed), which the relay turns into
 *  the arrays the Python workers save. */
final class Records {
    private final Map<String, long[]> arrays = new LinkedHashMap<>();
    private int count;

    Records(int capacity, String... names) {
        for (String n : names) {
            arrays.put(n, new long[capacity]);
        }
    }

    long[] get(String name) {
        return arrays.get(name);
    }

    int count() {
        return count;
    }

    /** Make room for index {@code i} in every array (duration runs outgrow the estimate). */
    void room(int i) {
        for (Map.Entry<String, long[]> e : arrays.entrySet()) {
            long[] a = e.getValue();
            if (i >= a.length) {
                e.setValue(Arrays.copyOf(a, Math.max(i + 1, a.length * 2)));
            }
        }
    }

    void setCount(int n) {
        count = n;
    }

    void write(String out, String error) throws IOException {
        StringBuilder index = new StringBuilder("{\"count\": ").append(count).append(", \"arrays\": {");
        String sep = "";
        for (Map.Entry<String, long[]> e : arrays.entrySet()) {
            Path file = Path.of(out + ".jvm-" + e.getKey() + ".bin");
            ByteBuffer buf = ByteBuffer.allocate(8 * count).order(ByteOrder.LITTLE_ENDIAN);
            buf.asLongBuffer().put(e.getValue(), 0, count);
            try (FileChannel ch = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                    StandardOpenOption.TRUNCATE_EXISTING)) {
                while (buf.hasRemaining()) {
                    ch.write(buf);
                }
            }
            index.append(sep).append('"').append(e.getKey()).append("\": \"").append(jsonText(file.toString()))
                 .append('"');
            sep = ", ";
        }
        index.append("}, \"error\": \"").append(jsonText(error)).append("\"}");
        Path tmp = Path.of(out + ".jvm.json.tmp");
        Files.writeString(tmp, index.toString());
        Files.move(tmp, Path.of(out + ".jvm.json"), StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    }

    private static String jsonText(String s) {
        StringBuilder b = new StringBuilder();
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.toString();
    }
}
