// A throw-away HDFS in one JVM for tests (src/cairn/testing/hdfs.py starts it): Apache
// Hadoop's own MiniDFSCluster, a NameNode and DataNodes on one address's ports, all data under one
// base directory. Compiled against hadoop-client-minicluster at prepare time.
//
// Usage: java -cp CLASSES:JARS/* [-Dminihdfs.host=ADDRESS] [-Dminihdfs.datadir=DIR] MiniHdfs
//            BASE_DIR NN_PORT DATANODES REPLICATION format|keep [KEY=VALUE...]
//        (keep: a restart on the namespace and blocks of an earlier run). ADDRESS (default
//        127.0.0.1) is where the NameNode and the DataNodes listen; the DataNodes register
//        through it, so the NameNode hands clients that address for their blocks (a simulated
//        host's address makes the cluster reachable from other hosts). DIR: DataNode i keeps its
//        blocks in DIR/dn<i> instead of under BASE_DIR (a small file system of their own: a
//        full disk without a full NameNode).
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
    // DataNode i's blocks in DIR/dn<i> (a conf overlay each), or null: MiniDFSCluster's dirs.
    private static Configuration[] dataDirs(String dir, int dataNodes) throws Exception {
        if (dir == null) {
            return null;
        }
        Configuration[] overlays = new Configuration[dataNodes];
        for (int i = 0; i < dataNodes; i++) {
            Path own = Path.of(dir, "dn" + i);
            Files.createDirectories(own);
            overlays[i] = new Configuration(false);
            overlays[i].set("dfs.datanode.data.dir", own.toUri().toString());
        }
        return overlays;
    }

    public static void main(String[] args) throws Exception {
        Path base = Path.of(args[0]).toAbsolutePath();
        int nnPort = Integer.parseInt(args[1]);
        int dataNodes = Integer.parseInt(args[2]);
        String host = System.getProperty("minihdfs.host", "127.0.0.1");
        Configuration conf = new Configuration();
        conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, base.resolve("dfs").toString());
        conf.set("dfs.replication", args[3]);
        // Elsewhere than the loopback (a network namespace of its own) the NameNode also listens
        // on 127.0.0.1, where MiniDFSCluster's own client (waitActive) calls it.
        conf.set("dfs.namenode.rpc-bind-host", "127.0.0.1".equals(host) ? host : "0.0.0.0");
        conf.set("dfs.namenode.http-bind-host", host);
        conf.set("dfs.namenode.http-address", host + ":0");
        conf.setBoolean("dfs.permissions.enabled", true);
        boolean format = !"keep".equals(args[4]);
        for (int i = 5; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            conf.set(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        boolean loopback = "127.0.0.1".equals(host);
        String dataDir = System.getProperty("minihdfs.datadir");
        String maintenanceMin = conf.get("dfs.namenode.maintenance.replication.min");
        MiniDFSCluster cluster = new MiniDFSCluster.Builder(conf)
                .nameNodePort(nnPort)
                .nameNodeHttpPort(0)
                .numDataNodes(loopback ? dataNodes : 0)
                .manageDataDfsDirs(dataDir == null)
                .dataNodeConfOverlays(loopback ? dataDirs(dataDir, dataNodes) : null)
                .format(format)
                .build();
        Runtime.getRuntime().addShutdownHook(new Thread(cluster::shutdown));
        if (!loopback) {
            // MiniDFSCluster points its DataNodes at 127.0.0.1, so they would register (and be
            // handed to clients) at 127.0.0.1. Built without DataNodes, it capped the default
            // replication at 0: restart the NameNode with the real one, then start DataNodes on
            // a copy of the conf naming the NameNode at HOST, so they register at HOST.
            Configuration nnConf = cluster.getConfiguration(0);
            nnConf.set("dfs.replication", args[3]);
            if (maintenanceMin == null) {
                nnConf.unset("dfs.namenode.maintenance.replication.min");
            } else {
                nnConf.set("dfs.namenode.maintenance.replication.min", maintenanceMin);
            }
            cluster.restartNameNode(false);
            Configuration dnConf = new Configuration(nnConf);
            int port = cluster.getNameNodePort();
            dnConf.set("fs.defaultFS", "hdfs://" + host + ":" + port);
            dnConf.set("dfs.namenode.rpc-address", host + ":" + port);
            dnConf.unset("dfs.namenode.servicerpc-address");
            dnConf.set("dfs.datanode.address", host + ":0");
            dnConf.set("dfs.datanode.http.address", host + ":0");
            dnConf.set("dfs.datanode.ipc.address", host + ":0");
            Configuration[] own = dataDirs(dataDir, dataNodes);
            if (own == null) {
                cluster.startDataNodes(dnConf, dataNodes, true, null, null, null, null, false, true);
            }
            for (int i = 0; own != null && i < dataNodes; i++) {
                Configuration one = new Configuration(dnConf);
                one.addResource(own[i]);
                cluster.startDataNodes(one, 1, false, null, null, null, null, false, true);
            }
        }
        cluster.waitActive();
        while (cluster.getNameNode().isInSafeMode()) { // a restart: until blocks are reported
            Thread.sleep(100);
        }
        Path ready = base.resolve("ready.tmp");
        Files.writeString(ready, "nn-port=" + cluster.getNameNodePort() + "\n");
        Files.move(ready, base.resolve("ready"), StandardCopyOption.ATOMIC_MOVE);
        System.out.println("MiniHdfs serving on " + host + ":" + cluster.getNameNodePort());
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
