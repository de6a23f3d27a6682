import com.sun.management.OperatingSystemMXBean;
import io.confluent.parallelconsumer.ParallelConsumerOptions;
import io.confluent.parallelconsumer.ParallelConsumerOptions.CommitMode;
import io.confluent.parallelconsumer.ParallelConsumerOptions.ProcessingOrder;
import io.confluent.parallelconsumer.ParallelStreamProcessor;
import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Confluent's parallel-consumer over one topic, for benchmarks/executor_vs_pc.py: a
 * ParallelStreamProcessor at a given maxConcurrency and ordering, whose handler sleeps a given
 * number of milliseconds (0: does nothing), until it handled the given number of records or
 * took none for the given stall time. Prints one JSON object on stdout: when the first record
 * started, when half and all of them ended, the JVM's process CPU time over the run, and the
 * largest commit metadata (its offset map) an AdminClient saw the group commit, read every
 * 100 ms. Its own log lines go to stderr (slf4j-simple), where the caller looks for its
 * "Payload size ... higher than threshold" warning.
 *
 * <p>Arguments: bootstrap topic group records maxConcurrency KEY|UNORDERED|PARTITION sleepMs
 * timeoutS stallS
 */
public final class PcBench {
    private static final AtomicLong handled = new AtomicLong();
    private static final AtomicLong firstStart = new AtomicLong();
    private static final AtomicLong halfEnd = new AtomicLong();
    private static final AtomicLong lastEnd = new AtomicLong();

    private PcBench() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 9) {
            System.err.println("usage: PcBench bootstrap topic group records maxConcurrency "
                    + "KEY|UNORDERED|PARTITION sleepMs timeoutS stallS");
            System.exit(2);
        }
        String bootstrap = args[0];
        String topic = args[1];
        String group = args[2];
        long records = Long.parseLong(args[3]);
        int concurrency = Integer.parseInt(args[4]);
        ProcessingOrder ordering = ProcessingOrder.valueOf(args[5]);
        long sleepMs = Long.parseLong(args[6]);
        long timeoutNs = (long) (Double.parseDouble(args[7]) * 1e9);
        long stallNs = (long) (Double.parseDouble(args[8]) * 1e9);
        OperatingSystemMXBean os =
                (OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();

        long startCpu = os.getProcessCpuTime();
        long start = System.nanoTime();
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props);
        ParallelConsumerOptions<byte[], byte[]> options =
                ParallelConsumerOptions.<byte[], byte[]>builder()
                        .consumer(consumer)
                        .ordering(ordering)
                        .maxConcurrency(concurrency)
                        .commitMode(CommitMode.PERIODIC_CONSUMER_ASYNCHRONOUS)
                        .build();
        ParallelStreamProcessor<byte[], byte[]> processor =
                ParallelStreamProcessor.createEosStreamProcessor(options);
        long half = records / 2;
        processor.subscribe(List.of(topic));
        processor.poll(context -> {
            firstStart.compareAndSet(0, System.nanoTime());
            if (sleepMs > 0) {
                try {
                    Thread.sleep(sleepMs);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return;
                }
            }
            long now = System.nanoTime();
            long count = handled.incrementAndGet();
            if (count == half) {
                halfEnd.set(now);
            }
            lastEnd.accumulateAndGet(now, Math::max);
        });

        Properties adminProps = new Properties();
        adminProps.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        long largestMetadata = 0;
        long lastMetadata = 0;
        long seen = 0;
        long progressAt = System.nanoTime();
        String ended = "records";
        try (Admin admin = Admin.create(adminProps)) {
            while (handled.get() < records) {
                long now = System.nanoTime();
                if (handled.get() != seen) {
                    seen = handled.get();
                    progressAt = now;
                } else if (now - progressAt > stallNs) {
                    ended = "stalled";
                    break;
                }
                if (now - start > timeoutNs) {
                    ended = "timeout";
                    break;
                }
                try {
                    Map<TopicPartition, OffsetAndMetadata> committed = admin
                            .listConsumerGroupOffsets(group)
                            .partitionsToOffsetAndMetadata()
                            .get();
                    long total = 0;
                    for (OffsetAndMetadata meta : committed.values()) {
                        if (meta != null && meta.metadata() != null) {
                            long size = meta.metadata().length();
                            total += size;
                            largestMetadata = Math.max(largestMetadata, size);
                        }
                    }
                    lastMetadata = total;
                } catch (java.util.concurrent.ExecutionException e) {
                    // The group is not known to the coordinator before its first commit.
                }
                Thread.sleep(100);
            }
        }
        long cpuNs = os.getProcessCpuTime() - startCpu;
        long done = handled.get();
        processor.close(Duration.ofSeconds(30), io.confluent.parallelconsumer.internal
                .DrainingCloseable.DrainingMode.DONT_DRAIN);

        Map<String, Object> out = new HashMap<>();
        out.put("records", done);
        out.put("ended", ended);
        out.put("wall_s", (lastEnd.get() - start) / 1e9);
        out.put("first_record_s", firstStart.get() == 0 ? -1 : (firstStart.get() - start) / 1e9);
        out.put("processing_s", firstStart.get() == 0 ? -1 : (lastEnd.get() - firstStart.get()) / 1e9);
        out.put("second_half_s", halfEnd.get() == 0 ? -1 : (lastEnd.get() - halfEnd.get()) / 1e9);
        out.put("half", half);
        out.put("cpu_s", cpuNs / 1e9);
        out.put("largest_offset_map", largestMetadata);
        out.put("last_offset_maps_bytes", lastMetadata);
        StringBuilder json = new StringBuilder("{");
        for (Map.Entry<String, Object> entry : out.entrySet()) {
            if (json.length() > 1) {
                json.append(", ");
            }
            Object value = entry.getValue();
            json.append('"').append(entry.getKey()).append("\": ");
            json.append(value instanceof String ? "\"" + value + "\"" : String.valueOf(value));
        }
        System.out.println(json.append('}'));
        System.out.flush();
        System.exit(0);
    }
}
