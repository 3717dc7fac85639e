// A throw-away YARN cluster in one JVM for tests (src/cairn/testing/yarn.py starts it): Apache
// Hadoop's own MiniYARNCluster, a ResourceManager (FIFO scheduler) and NodeManagers on loopback
// ports, their local and log directories under -Dtest.build.data. Compiled against
// hadoop-client-minicluster at prepare time, like MiniHdfs.java.
//
// Usage: java -Dtest.build.data=DATA -cp CLASSES:JARS/* MiniYarn BASE_DIR NODEMANAGERS
//            DEFAULT_FS [KEY=VALUE...]
//
// Once the cluster serves, BASE_DIR/conf holds the clients' yarn-site.xml and core-site.xml
// (fs.defaultFS = DEFAULT_FS) and BASE_DIR/ready "rm=<host:port>". While it runs, a file
// BASE_DIR/control/stop-nodemanager-<i> stops NodeManager i and its containers (a node lost),
// answered by BASE_DIR/control/stop-nodemanager-<i>.done. The JVM ends on SIGTERM.
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.MiniYARNCluster;

public final class MiniYarn {
    public static void main(String[] args) throws Exception {
        Path base = Path.of(args[0]).toAbsolutePath();
        int nodeManagers = Integer.parseInt(args[1]);
        YarnConfiguration conf = new YarnConfiguration();
        conf.set("yarn.resourcemanager.hostname", "127.0.0.1");
        conf.set("yarn.nodemanager.hostname", "127.0.0.1");
        conf.set("yarn.resourcemanager.scheduler.class",
                "org.apache.hadoop.yarn.server.resourcemanager.scheduler.fifo.FifoScheduler");
        conf.setInt("yarn.scheduler.minimum-allocation-mb", 128);
        conf.setBoolean("yarn.nodemanager.vmem-check-enabled", false);
        conf.setBoolean("yarn.nodemanager.pmem-check-enabled", false);
        conf.set("yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage",
                "99.9");
        // A stopped NodeManager is declared lost in seconds (default: 10 minutes), so its
        // containers are reported lost and Spark asks for new executors.
        conf.setLong("yarn.nm.liveness-monitor.expiry-interval-ms", 4000);
        conf.setLong("yarn.resourcemanager.nm.liveness-monitor.interval-ms", 1000);
        for (int i = 3; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            conf.set(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        MiniYARNCluster cluster = new MiniYARNCluster("cairn", nodeManagers, 1, 1);
        cluster.init(conf);
        cluster.start();
        Runtime.getRuntime().addShutdownHook(new Thread(cluster::stop));
        Configuration live = cluster.getConfig();
        Path confDir = base.resolve("conf");
        Files.createDirectories(confDir);
        try (OutputStream out = Files.newOutputStream(confDir.resolve("yarn-site.xml"))) {
            live.writeXml(out);
        }
        Configuration core = new Configuration(false);
        core.set("fs.defaultFS", args[2]);
        try (OutputStream out = Files.newOutputStream(confDir.resolve("core-site.xml"))) {
            core.writeXml(out);
        }
        String rm = live.get("yarn.resourcemanager.address");
        Path ready = base.resolve("ready.tmp");
        Files.writeString(ready, "rm=" + rm + "\n");
        Files.move(ready, base.resolve("ready"), StandardCopyOption.ATOMIC_MOVE);
        System.out.println("MiniYarn: ResourceManager at " + rm);
        Path control = base.resolve("control");
        Files.createDirectories(control);
        while (true) {
            try (var commands = Files.list(control)) {
                for (Path command : (Iterable<Path>) commands::iterator) {
                    String name = command.getFileName().toString();
                    if (name.endsWith(".done") || name.startsWith(".")) {
                        continue;
                    }
                    String answer = "ok";
                    try {
                        if (name.startsWith("stop-nodemanager-")) {
                            int i = Integer.parseInt(name.substring("stop-nodemanager-".length()));
                            cluster.getNodeManager(i).stop();
                        } else {
                            answer = "unknown command";
                        }
                    } catch (Exception e) {
                        answer = "error: " + e;
                    }
                    Files.delete(command);
                    Files.writeString(control.resolve(name + ".done"), answer + "\n");
                }
            }
            Thread.sleep(100);
        }
    }
}
