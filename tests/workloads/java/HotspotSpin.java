// A JVM workload for tests/hotspot.rs: one chain of methods that runs on
// the CPU forever, chosen by the first argument, its thread printing
// "<chain>-tid <kernel tid>" first:
//   main  the main thread: main -> a -> b -> c, c() a loop of arithmetic;
//   sort  thread "sorter": Sorter.run -> sortOnce -> ArrayList.sort (the
//         JDK's TimSort) -> ByLength.compare (its bridge, then itself)
//         -> spin: Java -> JDK -> Java;
//   jni   thread "jni" (with -Dhotspot.jni=<libhotspot_spin_jni.so>):
//         Jni.run -> jniOuter -> callBack (native) -> C, which calls
//         fromNative -> spin in a loop: Java -> C -> Java.
//   deopt    the main thread: main -> deoptOuter (a loop) -> deoptMiddle
//            (compiled by C2 with deoptInner and Square.area inlined:
//            Square is the only Shape) -> deoptLeaf (not inlined, with
//            -XX:CompileCommand=dontinline). After 4 s a thread makes
//            deoptLeaf spin forever, then loads Circle: deoptMiddle's code
//            is invalid, its frame waits for deoptLeaf to return to the
//            deoptimisation handler; prints "deopt-changed" then.
//   sleep    the main thread, off the CPU: main -> napOuter -> napInner
//            -> Thread.sleep(10 ms), in a loop.
//   cmp      thread "comparer": Comparer.run -> sortItems -> Arrays.sort
//            (TimSort) -> ByWeight.compare (its bridge, then itself) ->
//            weight, a loop: nearly all of the time is in the comparator,
//            which C2 inlines into TimSort's methods.
//   subtype  the main thread: main -> subtypeOuter, a loop of instanceof
//            checks of interfaces the objects' class does not implement:
//            C1's code (-XX:TieredStopAtLevel=1) calls its runtime stub
//            slow_subtype_check for each (a miss is never cached), a stub
//            without a frame size that pushes registers, its arguments
//            pushed by the caller.
//   copy     the main thread: main -> copyOuter -> System.arraycopy of
//            a large long[], to another and within itself: C2's code
//            calls StubRoutines' jlong_disjoint_arraycopy and
//            jlong_arraycopy, stubs that build an rbp frame inside a blob
//            whose frame size (0) is not their own.
// Interpreted under -Xint; otherwise the JIT compiles the loops with the
// small methods inlined, so the same chains come from compiled frames and
// their inlining scopes.
import java.io.File;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

public class HotspotSpin {
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        String chain = args.length > 0 ? args[0] : "main";
        switch (chain) {
            case "sort":
                new Sorter().start();
                break;
            case "cmp":
                new Comparer().start();
                break;
            case "jni":
                System.load(System.getProperty("hotspot.jni"));
                new Jni().start();
                break;
            case "sleep":
                printTid("sleep");
                while (true) {
                    napOuter();
                }
            case "deopt":
                new Changer().start();
                printTid("deopt");
                deoptOuter(new Square());
                break;
            case "subtype":
                printTid("subtype");
                while (true) {
                    subtypeOuter();
                }
            case "copy":
                printTid("copy");
                while (true) {
                    copyOuter();
                }
            case "tiny":
                printTid("tiny");
                while (true) {
                    tinyOuter();
                }
            default:
                printTid("main");
                while (true) {
                    a();
                }
        }
        Thread.sleep(Long.MAX_VALUE);
    }

    static void printTid(String chain) {
        try {
            System.out.println(chain + "-tid " + new File("/proc/thread-self").getCanonicalFile().getName());
            System.out.flush();
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    static void a() {
        b();
    }

    static void b() {
        c();
    }

    static void c() {
        long acc = sink;
        for (int i = 0; i < 200_000; i++) {
            acc = acc * 31 + (i ^ (acc >>> 7));
        }
        sink = acc;
    }

    /**
     * Calls a method of a few instructions (not inlined: the test says
     * -XX:CompileCommand=dontinline) in a loop: most of its samples fall
     * in its prologue or epilogue, before its frame is built or after it
     * is torn down.
     */
    static void tinyOuter() {
        int acc = (int) sink;
        for (int i = 0; i < 1_000_000; i++) {
            acc = tinyLeaf(acc, i);
        }
        sink = acc;
    }

    static int tinyLeaf(int acc, int i) {
        return acc * 31 + i;
    }

    interface Tag0 {}
    interface Tag1 {}
    interface Tag2 {}
    interface Tag3 {}
    interface Tag4 {}
    interface Tag5 {}
    interface Miss0 {}
    interface Miss1 {}
    interface Miss2 {}

    static final class Tagged implements Tag0, Tag1, Tag2, Tag3, Tag4, Tag5 {}

    static final class Labelled implements Tag5, Tag4, Tag3, Tag2, Tag1, Tag0 {}

    static final Object[] TAGGED = {new Tagged(), new Labelled()};

    /** Checks of interfaces that no object here implements. */
    static void subtypeOuter() {
        int hits = 0;
        for (int i = 0; i < 1_000_000; i++) {
            Object o = TAGGED[i & 1];
            if (o instanceof Miss0) {
                hits++;
            }
            if (o instanceof Miss1) {
                hits++;
            }
            if (o instanceof Miss2) {
                hits++;
            }
        }
        sink += hits;
    }

    static final long[] COPY_FROM = new long[1 << 16];
    static final long[] COPY_TO = new long[1 << 16];

    /** Not final: C2 cannot tell that the second copy does not overlap. */
    static int copyShift = 1;

    /**
     * Copies 512 KiB at a time: nearly all of the time in the stubs. The
     * second copy, within one array, goes to jlong_arraycopy, which builds
     * its frame then jumps into jlong_disjoint_arraycopy when the ranges
     * allow a forward copy.
     */
    static void copyOuter() {
        for (int i = 0; i < 1_000; i++) {
            System.arraycopy(COPY_FROM, 0, COPY_TO, 0, COPY_FROM.length);
            System.arraycopy(COPY_TO, copyShift, COPY_TO, 0, COPY_TO.length - copyShift);
        }
        sink += COPY_TO[1];
    }

    /** The leaf of the sort and jni chains. */
    static void spin(int n) {
        long acc = sink;
        for (int i = 0; i < n; i++) {
            acc = acc * 31 + (i ^ (acc >>> 7));
        }
        sink = acc;
    }

    static void sortOnce() {
        List<String> words = new ArrayList<>(List.of("pear", "fig", "banana", "kiwi", "apple", "plum"));
        words.sort(new ByLength());
        sink += words.get(0).length();
    }

    /** Orders by length, slowly; the JDK calls its bridge compare(Object, Object). */
    static class ByLength implements Comparator<String> {
        @Override
        public int compare(String x, String y) {
            spin(50_000);
            return Integer.compare(x.length(), y.length());
        }
    }

    static final class Item {
        final int v;

        Item(int v) {
            this.v = v;
        }
    }

    /** Not final: the loop's trip count is not a constant C2 could unroll away. */
    static int weightRounds = 400;

    static int weight(Item item) {
        int w = item.v;
        for (int i = 0; i < weightRounds; i++) {
            w = w * 0x9E3779B1 + (w >>> 15);
        }
        return w;
    }

    static final class ByWeight implements Comparator<Item> {
        @Override
        public int compare(Item x, Item y) {
            return Integer.compare(weight(x), weight(y));
        }
    }

    static void sortItems(Item[] items, Item[] work) {
        System.arraycopy(items, 0, work, 0, items.length);
        java.util.Arrays.sort(work, new ByWeight());
        sink += work[0].v;
    }

    static class Comparer extends Thread {
        Comparer() {
            super("comparer");
        }

        @Override
        public void run() {
            printTid("cmp");
            Item[] items = new Item[512];
            for (int i = 0; i < items.length; i++) {
                items[i] = new Item(i * 7919 % 1000);
            }
            Item[] work = new Item[items.length];
            while (true) {
                sortItems(items, work);
            }
        }
    }

    static class Sorter extends Thread {
        Sorter() {
            super("sorter");
        }

        @Override
        public void run() {
            printTid("sort");
            while (true) {
                sortOnce();
            }
        }
    }

    static void napOuter() throws InterruptedException {
        napInner();
    }

    static void napInner() throws InterruptedException {
        Thread.sleep(10);
    }

    abstract static class Shape {
        abstract long area(long side);
    }

    static final class Square extends Shape {
        @Override
        long area(long side) {
            return side * side;
        }
    }

    static final class Circle extends Shape {
        @Override
        long area(long side) {
            return 3 * side * side;
        }
    }

    static volatile boolean stayInLeaf;

    static void deoptOuter(Shape shape) {
        for (long round = 0; ; round++) {
            deoptMiddle(shape, round);
        }
    }

    static void deoptMiddle(Shape shape, long round) {
        deoptInner(shape, round);
    }

    static void deoptInner(Shape shape, long round) {
        sink += shape.area(round & 7);
        deoptLeaf();
    }

    static void deoptLeaf() {
        do {
            spin(2_000);
        } while (stayInLeaf);
    }

    /** Changes the class hierarchy under the compiled deoptOuter. */
    static class Changer extends Thread {
        Changer() {
            super("changer");
            setDaemon(true);
        }

        @Override
        public void run() {
            try {
                Thread.sleep(4_000);
                stayInLeaf = true;
                Thread.sleep(300);
                sink += new Circle().area(2);
                System.out.println("deopt-changed");
                System.out.flush();
            } catch (InterruptedException e) {
                throw new RuntimeException(e);
            }
        }
    }

    /** In hotspot_spin_jni.c: calls fromNative() forever. */
    static native void callBack();

    static void jniOuter() {
        callBack();
    }

    static void fromNative() {
        spin(200_000);
    }

    static class Jni extends Thread {
        Jni() {
            super("jni");
        }

        @Override
        public void run() {
            printTid("jni");
            jniOuter();
        }
    }
}
