package dev.lms4j.checkpoint;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import java.io.IOException;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;
import org.tensorflow.Graph;
import org.tensorflow.Session;

class LogBackendTest {

  @Test
  void logsNameSizeAndAddressOfEachTensorAndCannotLoad() throws IOException {
    Logger logger = (Logger) LoggerFactory.getLogger(LogBackend.class);
    ListAppender<ILoggingEvent> app = new ListAppender<>();
    app.start();
    logger.addAppender(app);
    try (Graph g = TestGraphs.allDtypes(); Session s = new Session(g);
        CheckpointBackend b = CheckpointBackends.open("log", "level=info")) {
      s.run("init_a");
      CheckpointInfo info = Checkpoints.save(s, List.of("f32", "i64"), 9, Map.of("m", "1"), b);
      assertThat(info.location()).isEqualTo("log");
      assertThat(info.byteSize()).isEqualTo(60 + 40);
      List<String> lines = app.list.stream().map(ILoggingEvent::getFormattedMessage).toList();
      assertThat(lines).hasSize(3);
      assertThat(lines.get(0)).matches(
          "checkpoint step 9: tensor f32 float32\\[3, 5\\] 60 bytes at 0x[0-9a-f]+");
      assertThat(lines.get(1)).matches(
          "checkpoint step 9: tensor i64 int64\\[5\\] 40 bytes at 0x[0-9a-f]+");
      assertThat(lines.get(2)).isEqualTo("checkpoint step 9: 2 tensors, 100 bytes, metadata {m=1}");
      assertThat(b.list()).isEmpty();
      assertThatThrownBy(() -> Checkpoints.load(s, List.of("f32"), info, b))
          .isInstanceOf(UnsupportedOperationException.class)
          .hasMessageContaining("'log' checkpoint backend only prints tensors");
    } finally {
      logger.detachAppender(app);
    }
    assertThatThrownBy(() -> CheckpointBackends.open("log", "level=loud"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("'level' must be info or debug, got 'loud'");
  }
}
