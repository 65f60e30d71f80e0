package dev.lms4j.checkpoint;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;
import java.util.stream.Stream;
import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class CheckpointBackendsTest {
  @TempDir Path tmp;

  /** The example plugin: an in-memory backend, compiled into its own jar by the test. */
  private static final String PLUGIN_SOURCE = """
      package example.plugin;

      import dev.lms4j.checkpoint.*;
      import java.nio.ByteBuffer;
      import java.util.*;

      public final class MemoryProvider implements CheckpointBackendProvider {
        public String name() { return "example-memory"; }

        public CheckpointBackend create(String params) {
          BackendParams p = BackendParams.parse(name(), params, Set.of("tag"));
          String tag = p.string("tag", "none");
          return new CheckpointBackend() {
            private final TreeMap<Long, Map<String, byte[]>> saved = new TreeMap<>();
            private final TreeMap<Long, CheckpointInfo> infos = new TreeMap<>();
            public String name() { return "example-memory"; }
            public CheckpointInfo save(long step, Map<String, String> md, List<TensorView> ts) {
              Map<String, byte[]> m = new HashMap<>();
              List<TensorSpec> specs = new ArrayList<>();
              for (TensorView v : ts) {
                byte[] b = new byte[(int) v.byteSize()];
                v.data().get(b);
                m.put(v.name(), b);
                specs.add(v.spec());
              }
              saved.put(step, m);
              Map<String, String> meta = new TreeMap<>(md);
              meta.put("tag", tag);
              CheckpointInfo info = new CheckpointInfo(step, meta, specs, "memory:" + step);
              infos.put(step, info);
              return info;
            }
            public void load(CheckpointInfo c, List<TensorView> targets) {
              for (TensorView t : targets) {
                t.data().put(saved.get(c.step()).get(t.name()));
              }
            }
            public List<CheckpointInfo> list() { return new ArrayList<>(infos.values()); }
            public void close() {}
          };
        }
      }
      """;

  @Test
  void builtInBackendsAreFoundByName() {
    assertThat(CheckpointBackends.names()).contains("files", "log", "tf");
    assertThat(CheckpointBackends.find("files")).get()
        .isInstanceOf(FilesBackendProvider.class);
    assertThat(CheckpointBackends.find("nope")).isEmpty();
    assertThatThrownBy(() -> CheckpointBackends.findOrThrow("nope"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("unknown checkpoint backend 'nope'")
        .hasMessageContaining("files, log, tf");
  }

  @Test
  void aPluginJarCompiledAtRunTimeIsLoadedFoundByNameAndUsed() throws Exception {
    Path jar = buildPluginJar();
    assertThat(CheckpointBackends.find("example-memory")).isEmpty();

    assertThat(CheckpointBackends.loadPlugin(jar)).containsExactly("example-memory");

    assertThat(CheckpointBackends.names()).contains("example-memory", "files");
    CheckpointBackendProvider p = CheckpointBackends.findOrThrow("example-memory");
    assertThat(p.getClass().getClassLoader()).isNotSameAs(getClass().getClassLoader());
    try (CheckpointBackend b = CheckpointBackends.open("example-memory", "tag=t1")) {
      ByteBuffer src = ByteBuffer.allocateDirect(16);
      for (int i = 0; i < 16; i++) {
        src.put(i, (byte) (i * 7));
      }
      CheckpointInfo info = b.save(4, Map.of("a", "b"),
          List.of(TensorView.of("x", DType.INT32, new long[] {2, 2}, src)));
      assertThat(info.metadata()).containsEntry("tag", "t1").containsEntry("a", "b");
      assertThat(b.latest()).contains(info);
      ByteBuffer dst = ByteBuffer.allocateDirect(16);
      b.load(info, List.of(TensorView.of("x", DType.INT32, new long[] {2, 2}, dst)));
      assertThat(dst).isEqualTo(src.clear());
    }
    assertThatThrownBy(() -> CheckpointBackends.open("example-memory", "tog=1"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("backend 'example-memory': unknown parameter 'tog'");
    // loading it again is refused: the name is taken
    assertThatThrownBy(() -> CheckpointBackends.loadPlugin(jar))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("'example-memory' is already registered");
  }

  @Test
  void aJarWithoutProvidersOrMissingIsRefused() throws IOException {
    Path empty = tmp.resolve("empty.jar");
    try (JarOutputStream j = new JarOutputStream(Files.newOutputStream(empty))) {
      j.putNextEntry(new JarEntry("README"));
      j.write("nothing".getBytes(StandardCharsets.UTF_8));
    }
    assertThatThrownBy(() -> CheckpointBackends.loadPlugin(empty))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("provides no checkpoint backend");
    assertThatThrownBy(() -> CheckpointBackends.loadPlugin(tmp.resolve("missing.jar")))
        .isInstanceOf(IOException.class).hasMessageContaining("does not exist");
  }

  private Path buildPluginJar() throws IOException {
    Path src = tmp.resolve("src/example/plugin/MemoryProvider.java");
    Files.createDirectories(src.getParent());
    Files.writeString(src, PLUGIN_SOURCE);
    Path classes = Files.createDirectories(tmp.resolve("classes"));
    JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
    assertThat(javac).as("a JDK (not a JRE) runs the tests").isNotNull();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int rc = javac.run(null, null, err, "-classpath", System.getProperty("java.class.path"),
        "-d", classes.toString(), src.toString());
    assertThat(rc).as(err.toString()).isZero();
    Path jar = tmp.resolve("example-plugin.jar");
    try (JarOutputStream j = new JarOutputStream(Files.newOutputStream(jar));
        Stream<Path> files = Files.walk(classes)) {
      for (Path f : files.filter(Files::isRegularFile).sorted().toList()) {
        j.putNextEntry(new JarEntry(classes.relativize(f).toString().replace('\\', '/')));
        Files.copy(f, j);
      }
      j.putNextEntry(new JarEntry("META-INF/services/" + CheckpointBackendProvider.class.getName()));
      OutputStream o = j;
      o.write("example.plugin.MemoryProvider\n".getBytes(StandardCharsets.UTF_8));
    }
    return jar;
  }
}
