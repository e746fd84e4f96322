// The "unseen program" of tests/hotspot.rs's closing measurement (issue
// 12's "done when"), written apart from HotspotSpin: two chains on the
// CPU at once, started cold when the file named by the first argument
// appears (the main thread spins in awaitGo meanwhile, printing
// "main-tid <kernel tid>" first):
//   main     the main thread: main -> Auditor.audit -> reconcile ->
//            Ledger.balance -> Ledger.digest (the leaf, a small loop
//            called from balance's loop: inlined once C2 compiles);
//   indexer  thread "indexer" (printing "indexer-tid <tid>"):
//            Indexer.run -> rebuild -> Arrays.sort (the JDK's TimSort)
//            -> the lambda's hidden class -> lambda$rebuild$0 -> weigh
//            (the leaf): Java -> JDK -> Java through a lambda.
import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;

public final class LedgerAudit {
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        printTid("main");
        awaitGo(Path.of(args[0]));
        new Indexer().start();
        new Auditor(8, 96).audit();
    }

    static void printTid(String chain) {
        try {
            System.out.println(chain + "-tid " + new File("/proc/thread-self").getCanonicalFile().getName());
            System.out.flush();
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    /** Keeps the main thread on the CPU (so that it is sampled) until `go` exists. */
    static void awaitGo(Path go) {
        long acc = sink;
        while (!Files.exists(go)) {
            for (int i = 0; i < 2_000_000; i++) {
                acc = acc * 17 + (i | (acc >>> 11));
            }
            sink = acc;
        }
    }

    static final class Auditor {
        private final long[][] accounts;

        Auditor(int count, int entries) {
            accounts = new long[count][entries];
            for (int a = 0; a < count; a++) {
                for (int e = 0; e < entries; e++) {
                    accounts[a][e] = 1_000L * a + 7L * e;
                }
            }
        }

        void audit() {
            for (int round = 0; ; round++) {
                sink += reconcile(round);
            }
        }

        long reconcile(int round) {
            long total = 0;
            for (long[] entries : accounts) {
                total ^= Ledger.balance(entries, round);
            }
            return total;
        }
    }

    static final class Ledger {
        static long balance(long[] entries, int round) {
            long acc = round;
            for (long entry : entries) {
                acc = digest(acc, entry ^ round);
            }
            return acc;
        }

        static long digest(long acc, long value) {
            for (int i = 0; i < 48; i++) {
                acc = (acc ^ value) * 0x9E3779B97F4A7C15L + (acc >>> 29);
            }
            return acc;
        }
    }

    static final class Indexer extends Thread {
        private final Long[] keys = new Long[40];

        Indexer() {
            super("indexer");
            for (int i = 0; i < keys.length; i++) {
                keys[i] = (long) ((i * 7919) % 97);
            }
        }

        @Override
        public void run() {
            printTid("indexer");
            for (int round = 0; ; round++) {
                sink += rebuild(round);
            }
        }

        long rebuild(int round) {
            Long[] copy = keys.clone();
            Arrays.sort(copy, (p, q) -> Long.compare(weigh(p, round), weigh(q, round)));
            return copy[0];
        }

        static long weigh(long key, int round) {
            long acc = key + round;
            for (int i = 0; i < 3_000; i++) {
                acc = acc * 31 + (i ^ (acc >>> 7));
            }
            return acc & 0xffff;
        }
    }
}
