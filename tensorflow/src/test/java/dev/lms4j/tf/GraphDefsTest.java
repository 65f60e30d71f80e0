package dev.lms4j.tf;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.tensorflow.proto.MetaGraphDef;
import org.tensorflow.proto.SavedModel;

class GraphDefsTest {
  @TempDir Path dir;

  @Test
  void readsPbFilesAndSavedModelDirectories() throws Exception {
    TrainingGraph net = TinyNet.build(8, 16, 2);
    Path pb = dir.resolve("g.pb");
    Files.write(pb, net.graphDef().toByteArray());
    assertThat(GraphDefs.readAny(pb, null)).isEqualTo(net.graphDef());

    Path sm = Files.createDirectories(dir.resolve("saved"));
    SavedModel model = SavedModel.newBuilder().addMetaGraphs(MetaGraphDef.newBuilder()
        .setMetaInfoDef(MetaGraphDef.MetaInfoDef.newBuilder().addTags("train"))
        .setGraphDef(net.graphDef())).build();
    Files.write(sm.resolve("saved_model.pb"), model.toByteArray());
    assertThat(GraphDefs.readAny(sm, "train")).isEqualTo(net.graphDef());
    assertThat(GraphDefs.readAny(sm, null)).isEqualTo(net.graphDef());
    assertThatThrownBy(() -> GraphDefs.readAny(sm, "serve"))
        .hasMessageContaining("no meta graph tagged 'serve'");
    // a SavedModel can be planned and rewritten like a .pb
    Path mf = dir.resolve("m.json");
    net.manifest().write(mf);
    LmsResult r = Lms.builder().params(dev.lms4j.core.plan.SwapParams.builder()
        .swapoutThreshold(2).swapinAhead(1).swapinGroupby(0).build()).build()
        .rewrite(TrainingGraph.load(sm, mf));
    assertThat(r.rewritten()).isTrue();
  }

  @Test
  void rejectsNonGraphs() throws Exception {
    Path junk = dir.resolve("junk.pb");
    Files.write(junk, new byte[] {1, 2, 3, (byte) 0xff});
    assertThatThrownBy(() -> GraphDefs.readAny(junk, null))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("junk.pb");
    Path empty = dir.resolve("empty.pb");
    Files.write(empty, new byte[0]);
    assertThatThrownBy(() -> GraphDefs.readAny(empty, null))
        .hasMessageContaining("holds no GraphDef nodes");
    assertThatThrownBy(() -> GraphDefs.readAny(dir, null))
        .hasMessageContaining("without saved_model.pb");
  }

  @Test
  void manifestErrorsAreClear() {
    assertThatThrownBy(() -> Manifest.parse("{\"feeds\":[],\"train_op\":\"t\"}"))
        .hasMessageContaining("\"loss\"");
    assertThatThrownBy(() -> Manifest.parse("{\"feeds\":[{\"name\":\"x\",\"shape\":[2],"
        + "\"fill\":\"sparkly\"}],\"loss\":\"l\",\"train_op\":\"t\"}"))
        .hasMessageContaining("unknown fill 'sparkly'");
    Manifest m = Manifest.parse("{\"feeds\":[{\"name\":\"x\",\"shape\":[4,3]}],"
        + "\"loss\":\"l\",\"train_op\":\"t\",\"extra\":1}");
    assertThat(m.loss()).isEqualTo("l:0");
    assertThat(m.feeds().get(0).dtype()).isEqualTo("float32");
    assertThat(m.feeds().get(0).fill()).isEqualTo("normal");
    assertThat(m.batchSize()).isEqualTo(4);
    assertThat(Manifest.parse(m.toJson())).isEqualTo(m);
    Manifest withMetrics = Manifest.parse("{\"feeds\":[],\"loss\":\"l\",\"train_op\":\"t\","
        + "\"metrics\":{\"accuracy\":\"acc\"}}");
    assertThat(withMetrics.metrics()).containsEntry("accuracy", "acc:0");
    assertThat(Manifest.parse(withMetrics.toJson())).isEqualTo(withMetrics);
  }
}
