// Maven's own resolver (maven-resolver 1.6 + maven-resolver-provider of Maven 3.8, the jars in
// /usr/share/maven/lib) run over a local repository directory, offline: the reference the
// tests compare `znippy-sql maven deps` with. Usage:
//   java -cp '/usr/share/maven/lib/*' MavenDeps.java REPOSITORY G:A:V... | -  (coordinates on stdin)
// Output: "@ java.version=V" (what profile activation saw), then for each root "# G:A:V",
// "! problem" lines, and the resolved tree depth first, one node a line:
// "DEPTH group:artifact:extension:classifier:version SCOPE OPTIONAL". The root is a project:
// its descriptor's dependencies and dependencyManagement form the collect request. A missing
// POM is ignored (the node has no children); a missing parent or BOM is a problem.
import java.util.*;
import org.apache.maven.repository.internal.MavenRepositorySystemUtils;
import org.eclipse.aether.*;
import org.eclipse.aether.artifact.*;
import org.eclipse.aether.collection.*;
import org.eclipse.aether.graph.*;
import org.eclipse.aether.impl.DefaultServiceLocator;
import org.eclipse.aether.repository.LocalRepository;
import org.eclipse.aether.resolution.*;
import org.eclipse.aether.util.repository.SimpleArtifactDescriptorPolicy;

public class MavenDeps {
    public static void main(String[] args) throws Exception {
        DefaultServiceLocator locator = MavenRepositorySystemUtils.newServiceLocator();
        RepositorySystem system = locator.getService(RepositorySystem.class);
        DefaultRepositorySystemSession session = MavenRepositorySystemUtils.newSession();
        session.setOffline(true);
        session.setArtifactDescriptorPolicy(new SimpleArtifactDescriptorPolicy(true, true));
        session.setSystemProperties(System.getProperties());
        session.setLocalRepositoryManager(system.newLocalRepositoryManager(session, new LocalRepository(new java.io.File(args[0]), "simple")));
        System.out.println("@ java.version=" + System.getProperty("java.version"));
        List<String> coords = new ArrayList<>();
        if (args[1].equals("-")) {
            java.io.BufferedReader in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in));
            for (String line; (line = in.readLine()) != null; ) if (!line.isBlank()) coords.add(line.trim());
        } else coords.addAll(Arrays.asList(args).subList(1, args.length));
        for (String coord : coords) {
            System.out.println("# " + coord);
            ArtifactDescriptorResult d;
            try {
                d = system.readArtifactDescriptor(session, new ArtifactDescriptorRequest(new DefaultArtifact(coord), null, null));
            } catch (ArtifactDescriptorException e) {
                System.out.println("! descriptor " + e.getMessage().replace('\n', ' '));
                continue;
            }
            CollectRequest req = new CollectRequest();
            req.setRootArtifact(d.getArtifact());
            req.setDependencies(d.getDependencies());
            req.setManagedDependencies(d.getManagedDependencies());
            DependencyNode root;
            try {
                root = system.collectDependencies(session, req).getRoot();
            } catch (DependencyCollectionException e) {
                System.out.println("! " + e.getMessage().replace('\n', ' '));
                root = e.getResult().getRoot();
            }
            if (root != null) print(root, 0);
        }
    }
    static void print(DependencyNode n, int depth) {
        if (depth > 0) {
            Artifact a = n.getArtifact();
            Dependency d = n.getDependency();
            System.out.println(depth + " " + a.getGroupId() + ":" + a.getArtifactId() + ":" + a.getExtension() + ":" + a.getClassifier() + ":" + a.getVersion() + " " + d.getScope() + " " + d.isOptional());
        }
        for (DependencyNode c : n.getChildren()) print(c, depth + 1);
    }
}
