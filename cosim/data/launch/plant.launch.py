"""Launch the cosim plant node alone (needs a ROS 2 install with launch_ros).

    ros2 launch launch/plant.launch.py
    ros2 launch launch/plant.launch.py params_file:=$PWD/launch/pendulum_free_run.yaml

The node is the ``cosim-ros`` console script of the installed ``cosim``
package (pip install -e .[ros]); launch_ros runs it from PATH.
"""
import os

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

HERE = os.path.dirname(os.path.abspath(__file__))


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument(
            "params_file", default_value=os.path.join(HERE, "two_link_real_time.yaml"),
            description="plant parameter YAML (node name cosim_sim)"),
        DeclareLaunchArgument("use_sim_time", default_value="false",
                              description="the plant is the time source: keep false"),
        Node(executable="cosim-ros", name="cosim_sim", output="screen", emulate_tty=True,
             parameters=[LaunchConfiguration("params_file")]),
    ])
