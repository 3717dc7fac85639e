// A throw-away HDFS in one JVM for tests (src/cairn/testing/hdfs.py starts it): Apache
// Hadoop's own MiniDFSCluster, a NameNode and DataNodes on loopback ports, all data under one
// base directory. Compiled against hadoop-client-minicluster at prepare time.
//
// Usage: java -cp CLASSES:JARS/* MiniHdfs BASE_DIR NN_PORT DATANODES REPLICATION format|keep
//            [KEY=VALUE...]   (keep: a restart on the namespace and blocks of an earlier run)
//
// Once the cluster serves, BASE_DIR/ready holds "nn-port=<port>". While it runs, a file
// BASE_DIR/control/<command> asks for a DataNode fault, answered by BASE_DIR/control/<command>.done:
// "stop-datanode-<i>" stops DataNode i (its blocks stay on disk), "restart-datanode-<i>" starts
// it again on the same ports and data. The JVM ends on SIGTERM (the cluster shut down first).
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.HashMap;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.MiniDFSCluster;

public final class MiniHdfs {
    public static void main(String[] args) throws Exception {
        Path base = Path.of(args[0]).toAbsolutePath();
        int nnPort = Integer.parseInt(args[1]);
        int dataNodes = Integer.parseInt(args[2]);
        Configuration conf = new Configuration();
        conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, base.resolve("dfs").toString());
        conf.set("dfs.replication", args[3]);
        conf.set("dfs.namenode.rpc-bind-host", "127.0.0.1");
        conf.set("dfs.namenode.http-address", "127.0.0.1:0");
        conf.set("dfs.datanode.address", "127.0.0.1:0");
        conf.set("dfs.datanode.http.address", "127.0.0.1:0");
        conf.set("dfs.datanode.ipc.address", "127.0.0.1:0");
        conf.setBoolean("dfs.permissions.enabled", true);
        boolean format = !"keep".equals(args[4]);
        for (int i = 5; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            conf.set(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        MiniDFSCluster cluster = new MiniDFSCluster.Builder(conf)
                .nameNodePort(nnPort)
                .nameNodeHttpPort(0)
                .numDataNodes(dataNodes)
                .format(format)
                .build();
        Runtime.getRuntime().addShutdownHook(new Thread(cluster::shutdown));
        cluster.waitActive();
        while (cluster.getNameNode().isInSafeMode()) { // a restart: until blocks are reported
            Thread.sleep(100);
        }
        Path ready = base.resolve("ready.tmp");
        Files.writeString(ready, "nn-port=" + cluster.getNameNodePort() + "\n");
        Files.move(ready, base.resolve("ready"), StandardCopyOption.ATOMIC_MOVE);
        System.out.println("MiniHdfs serving on 127.0.0.1:" + cluster.getNameNodePort());
        Path control = base.resolve("control");
        Files.createDirectories(control);
        Map<Integer, MiniDFSCluster.DataNodeProperties> stopped = new HashMap<>();
        while (true) {
            try (var commands = Files.list(control)) {
                for (Path command : (Iterable<Path>) commands::iterator) {
                    String name = command.getFileName().toString();
                    if (name.endsWith(".done")) {
                        continue;
                    }
                    String answer = "ok";
                    try {
                        if (name.startsWith("stop-datanode-")) {
                            int i = Integer.parseInt(name.substring("stop-datanode-".length()));
                            stopped.put(i, cluster.stopDataNode(i));
                        } else if (name.startsWith("restart-datanode-")) {
                            int i = Integer.parseInt(name.substring("restart-datanode-".length()));
                            cluster.restartDataNode(stopped.remove(i), true);
                            cluster.waitActive();
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
