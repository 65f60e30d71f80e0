package dev.lms4j.tf.run;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.lms4j.tf.Manifest;
import java.util.HashSet;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.tensorflow.types.TInt32;
import org.tensorflow.types.TInt64;

/** Manifest feeds of ids: {@code "fill":"ids", "max":N} gives seeded ids in {@code [0, N)}. */
class IdFeedsTest {

  @Test
  void idsCoverTheRangeAndStayInIt() {
    Manifest m = Manifest.parse("{\"feeds\":[{\"name\":\"ids\",\"dtype\":\"int32\","
        + "\"shape\":[64,32],\"fill\":\"ids\",\"max\":1000}],\"loss\":\"loss\","
        + "\"train_op\":\"t\"}");
    Manifest.Feed f = m.feeds().get(0);
    assertThat(f.max()).isEqualTo(1000);
    Set<Integer> seen = new HashSet<>();
    try (TInt32 t = (TInt32) SyntheticFeeds.make(f, 0, 42, 1)) {
      t.scalars().forEach(s -> seen.add(s.getInt()));
    }
    assertThat(seen).allSatisfy(id -> assertThat(id).isBetween(0, 999));
    // 2048 uniform draws from 1000 ids touch about 1000 * (1 - e^-2.048) = 871 distinct ids;
    // the old round(10 x normal) fill touched about 60 (and negative ones)
    assertThat(seen.size()).isGreaterThan(700);
  }

  @Test
  void idsAreSeededAndInt64Works() {
    Manifest.Feed f = Manifest.Feed.ids("ids", "int64", new long[] {8}, 5_000_000_000L);
    long[] a = new long[8];
    long[] b = new long[8];
    try (TInt64 x = (TInt64) SyntheticFeeds.make(f, 0, 7, 3);
        TInt64 y = (TInt64) SyntheticFeeds.make(f, 0, 7, 3)) {
      for (int i = 0; i < 8; i++) {
        a[i] = x.getLong(i);
        b[i] = y.getLong(i);
      }
    }
    assertThat(a).isEqualTo(b);
    assertThat(java.util.Arrays.stream(a).boxed().toList())
        .allSatisfy(v -> assertThat(v).isBetween(0L, 4_999_999_999L));
    assertThat(Manifest.parse(new Manifest(java.util.List.of(f), "loss", "t", null).toJson())
        .feeds().get(0)).isEqualTo(f);
  }

  @Test
  void badIdFeedsAreRefused() {
    assertThatThrownBy(() -> Manifest.parse("{\"feeds\":[{\"name\":\"x\",\"dtype\":\"float32\","
        + "\"shape\":[4],\"fill\":\"ids\",\"max\":10}],\"loss\":\"l\",\"train_op\":\"t\"}"))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("int32 or int64");
    assertThatThrownBy(() -> Manifest.parse("{\"feeds\":[{\"name\":\"x\",\"dtype\":\"int32\","
        + "\"shape\":[4],\"fill\":\"ids\"}],\"loss\":\"l\",\"train_op\":\"t\"}"))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("\"max\" >= 1");
    assertThatThrownBy(() -> Manifest.parse("{\"feeds\":[{\"name\":\"x\",\"dtype\":\"int32\","
        + "\"shape\":[4],\"fill\":\"normal\",\"max\":3}],\"loss\":\"l\",\"train_op\":\"t\"}"))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("only goes with");
    assertThatThrownBy(() -> Manifest.Feed.ids("x", "int32", new long[] {4}, 1L << 40))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("int32");
  }
}
